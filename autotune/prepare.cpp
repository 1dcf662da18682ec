#include "autotune/prepare.hpp"
#include "plan/attention_spec.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace sage2::autotune {
namespace {

struct Job {
  Job(kernels::KernelSpec s, std::string k) : spec(std::move(s)), key(std::move(k)) {}
  kernels::KernelSpec spec;
  std::string key;         // spec.key(): one job per specialisation
  std::string cache_key;   // its disk cache key, once built or found
  bool ok = false, skipped = false, from_cache = false, stored = false;
  std::string error;
  jit::PtxasFacts facts;
};

// The first lines of a compile error (the full NVRTC log can be long).
std::string first_lines(const std::string& s, int lines = 6) {
  std::size_t at = 0;
  for (int i = 0; i < lines && at != std::string::npos; ++i) {
    at = s.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  return at == std::string::npos ? s : s.substr(0, at) + "...";
}

class Runner {
 public:
  Runner(const cache::DiskCache& cache, const PrepareOptions& o) : cache_(cache), o_(o) {}

  void run(std::vector<Job>& jobs, const char* phase, std::size_t& done, std::size_t& total) {
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i = next++; i < jobs.size(); i = next++) {
        Job& j = jobs[i];
        if (o_.stop && o_.stop->load()) {
          j.skipped = true;
          continue;
        }
        try {
          const jit::KernelBuild build = jit::make_build(j.spec);
          if (auto cached = cache_.load_build(build)) {
            j.facts = cached->facts;
            j.cache_key = cached->key;
            j.from_cache = true;
            j.stored = true;
          } else {
            const jit::CompiledKernel k = jit::compile(build);
            j.facts = k.facts;
            j.cache_key = k.key;
            j.stored = cache_.store(k);
          }
          j.ok = true;
        } catch (const std::exception& e) {
          j.error = first_lines(e.what());
        }
        if (o_.progress) {
          std::lock_guard<std::mutex> lock(mu_);
          ++done;
          PrepareProgress p;
          p.phase = phase;
          p.done = done;
          p.total = total;
          p.label = j.key;
          o_.progress(p);
        }
      }
    };
    const int n = std::max(1, std::min<int>(o_.jobs, static_cast<int>(jobs.size())));
    std::vector<std::thread> threads;
    for (int t = 1; t < n; ++t) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
  }

 private:
  const cache::DiskCache& cache_;
  const PrepareOptions& o_;
  std::mutex mu_;
};

void account(const Job& j, PrepareStats& st, std::set<std::string>& keys) {
  if (j.skipped) {
    ++st.skipped;
    return;
  }
  if (!j.ok) {
    ++st.compile_errors;
    st.errors.push_back(j.key + ": " + j.error);
    return;
  }
  keys.insert(j.cache_key);
  if (j.from_cache) ++st.from_cache;
  else ++st.compiled;
  if (!j.stored) ++st.store_failed;
}

}  // namespace

const char* candidate_state_name(CandidateState s) noexcept {
  switch (s) {
    case CandidateState::Pending: return "pending";
    case CandidateState::Ok: return "ok";
    case CandidateState::Rejected: return "rejected";
    case CandidateState::CompileError: return "compile_error";
    case CandidateState::Skipped: return "skipped";
  }
  return "?";
}

std::size_t SpecialisationPlan::count(CandidateState s) const {
  return static_cast<std::size_t>(
      std::count_if(candidates.begin(), candidates.end(), [&](const Candidate& c) { return c.state == s; }));
}

const Candidate* SpecialisationPlan::heuristic_candidate() const {
  for (const auto& c : candidates)
    if (c.heuristic) return &c;
  return nullptr;
}

plan::CallSettings call_settings(const PrepareOptions& o, const plan::Specialisation& s) {
  plan::CallSettings c;
  c.arch = o.arch;
  c.ptx = o.ptx;
  c.device.max_smem_optin = o.max_smem_optin > 0 ? o.max_smem_optin : plan::default_max_smem_optin(o.arch);
  c.quant_path = o.quant_path;
  c.family = s.family;
  return c;
}

void prepare_specs(const std::vector<kernels::KernelSpec>& specs, const cache::DiskCache& cache,
                   const PrepareOptions& o, PrepareStats& st) {
  const auto t0 = std::chrono::steady_clock::now();
  std::set<std::string> keys(st.keys.begin(), st.keys.end());
  std::vector<Job> jobs;
  std::set<std::string> seen;
  for (const kernels::KernelSpec& s : specs) {
    const std::string key = s.key();
    if (!seen.insert(key).second) continue;
    try {
      if (keys.count(jit::make_build(s).key)) continue;  // prepared already (a candidate's kernel)
    } catch (const std::exception&) {
      // the job reports it
    }
    jobs.push_back(Job{s, key});
  }
  std::size_t done = 0, total = jobs.size();
  Runner(cache, o).run(jobs, "warm-up", done, total);
  for (const auto& j : jobs) account(j, st, keys);
  st.kernels = keys.size();
  st.keys.assign(keys.begin(), keys.end());
  st.interrupted = st.interrupted || st.skipped > 0 || (o.stop && o.stop->load());
  st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<SpecialisationPlan> plan_candidates(const std::vector<plan::Specialisation>& specs,
                                                const PrepareOptions& o) {
  const int smem = o.max_smem_optin > 0 ? o.max_smem_optin : plan::default_max_smem_optin(o.arch);
  std::vector<SpecialisationPlan> plans;
  for (const plan::Specialisation& s : specs) {
    SpecialisationPlan p;
    p.spec = s;
    plan::CallSettings settings = call_settings(o, s);
    settings.device.max_smem_optin = smem;
    const plan::AttentionProblem problem = s.problem();
    try {
      p.heuristic = plan::heuristic_tile(s.attention_spec(o.arch, kernels::TileConfig{}), smem);
      p.has_heuristic = true;
    } catch (const std::exception& e) {
      p.heuristic_problem = e.what();
    }
    const kernels::KernelFamily family = s.attention_spec(o.arch, kernels::TileConfig{}).family;
    const auto& tiles = o.tiles.empty() ? plan::tile_candidates(family, o.arch) : o.tiles;
    std::vector<kernels::TileConfig> list;
    for (const auto& t : tiles)
      if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
    if (p.has_heuristic && std::find(list.begin(), list.end(), p.heuristic) == list.end()) list.push_back(p.heuristic);
    for (const auto& t : list) {
      Candidate c;
      c.tile = t;
      c.spec = plan::attention_call_spec(problem, settings, t);  // what a call with tile t runs
      c.heuristic = p.has_heuristic && t == p.heuristic;
      if (auto why = plan::static_reject_reason(c.spec, smem)) {
        c.state = CandidateState::Rejected;
        c.reason = *why;
      }
      p.candidates.push_back(std::move(c));
    }
    plans.push_back(std::move(p));
  }

  return plans;
}

std::vector<SpecialisationPlan> prepare_kernels(const std::vector<plan::Specialisation>& specs,
                                                const cache::DiskCache& cache, const PrepareOptions& o,
                                                PrepareStats& st) {
  const auto t0 = std::chrono::steady_clock::now();
  st = PrepareStats{};

  // 1. candidates and the static filter.
  std::vector<SpecialisationPlan> plans = plan_candidates(specs, o);

  // 2. attention kernels (one job per unique key).
  std::map<std::string, std::size_t> attn_index;
  std::vector<Job> attn_jobs;
  std::set<std::string> companion_upper;  // companions of every statically accepted candidate
  for (auto& p : plans)
    for (auto& c : p.candidates) {
      if (c.state != CandidateState::Pending) continue;
      const std::string key = c.spec.key();
      if (attn_index.emplace(key, attn_jobs.size()).second) attn_jobs.push_back(Job{c.spec, key});
      for (const auto& cs : plan::companion_specs(c.spec, o.quant_path)) companion_upper.insert(cs.key());
    }
  std::size_t done = 0, total = attn_jobs.size() + companion_upper.size();
  Runner runner(cache, o);
  runner.run(attn_jobs, "compile", done, total);

  std::set<std::string> keys;
  for (const auto& j : attn_jobs) account(j, st, keys);
  for (auto& p : plans)
    for (auto& c : p.candidates) {
      if (c.state != CandidateState::Pending) continue;
      const Job& j = attn_jobs[attn_index.at(c.spec.key())];
      if (j.skipped) {
        c.state = CandidateState::Skipped;
        c.reason = "interrupted before it was compiled";
        continue;
      }
      if (!j.ok) {
        c.state = CandidateState::CompileError;
        c.reason = j.error;
        continue;
      }
      c.facts = j.facts;
      c.attention_built = true;
      if (auto why = plan::ptxas_reject_reason(c.spec, j.facts)) {
        c.state = CandidateState::Rejected;
        c.reason = *why;
      } else {
        c.state = CandidateState::Ok;
      }
    }

  // 3. companions of the accepted candidates and of every compiled heuristic default.
  std::map<std::string, std::size_t> comp_index;
  std::vector<Job> comp_jobs;
  // The heuristic default runs whenever there is no tuning entry, so its kernels are prepared
  // (and it is timed as the baseline) even when its attention kernel fails the ptxas check.
  auto wants_companions = [](const Candidate& c) {
    return c.state == CandidateState::Ok || (c.heuristic && c.attention_built);
  };
  for (auto& p : plans)
    for (auto& c : p.candidates) {
      if (!wants_companions(c)) continue;
      for (const auto& cs : plan::companion_specs(c.spec, o.quant_path)) {
        const std::string key = cs.key();
        if (comp_index.emplace(key, comp_jobs.size()).second) comp_jobs.push_back(Job{cs, key});
      }
    }
  total = attn_jobs.size() + comp_jobs.size();
  runner.run(comp_jobs, "companions", done, total);
  for (const auto& j : comp_jobs) account(j, st, keys);
  for (auto& p : plans)
    for (auto& c : p.candidates) {
      if (!wants_companions(c)) continue;
      bool all = true;
      for (const auto& cs : plan::companion_specs(c.spec, o.quant_path)) {
        const Job& j = comp_jobs[comp_index.at(cs.key())];
        if (j.skipped) {
          all = false;
          if (c.state == CandidateState::Ok) {
            c.state = CandidateState::Skipped;
            c.reason = "interrupted before its quantize/ΔS kernels were compiled";
          }
        } else if (!j.ok) {
          all = false;
          if (c.state == CandidateState::Ok) {
            c.state = CandidateState::CompileError;
            c.reason = "companion kernel " + j.key + ": " + j.error;
          }
        }
      }
      c.compiled = all;
    }
  st.kernels = keys.size();
  st.keys.assign(keys.begin(), keys.end());
  st.interrupted = st.skipped > 0 || (o.stop && o.stop->load());
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plans;
}

}  // namespace sage2::autotune
