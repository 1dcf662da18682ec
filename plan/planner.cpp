#include "plan/planner.hpp"
#include "plan/attention_spec.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "plan/candidates.hpp"
#include "base/log.hpp"

namespace sage2::plan {

Planner::Planner(std::string db_path, std::string device_name, kernels::Arch arch, int max_smem_optin)
    : db_path_(std::move(db_path)),
      device_name_(std::move(device_name)),
      arch_(arch),
      max_smem_(max_smem_optin) {}

Planner::Planner(TuningDb db, kernels::Arch arch, int max_smem_optin) : arch_(arch), max_smem_(max_smem_optin) {
  std::call_once(loaded_, [&] {
    db_ = std::move(db);
    code_ = CodeIdentity::current();
  });
}

const TuningDb& Planner::db() const {
  std::call_once(loaded_, [&] {
    if (db_path_.empty()) return;
    code_ = CodeIdentity::current();  // here, not in the constructor: it loads NVRTC
    DbReadResult r = load_db(db_path_, device_name_, arch_);  // warns once when unusable
    if (r.status != DbStatus::Ok) return;
    std::size_t current = 0;
    for (const auto& e : r.entries) current += code_.matches(e) ? 1 : 0;
    if (current < r.entries.size())
      base::log::info("tuning database " + db_path_ + ": " + std::to_string(r.entries.size() - current) + " of " +
                std::to_string(r.entries.size()) + " entries were measured with other kernel code (this is " +
                code_.code_version + (code_.nvrtc_version.empty() ? "" : ", NVRTC " + code_.nvrtc_version) +
                ") and are not used (run sage2-autotune again)");
    db_ = TuningDb(std::move(r.entries));
  });
  return db_;
}

std::size_t Planner::db_entries() const { return db().entries().size(); }

std::size_t Planner::memoised() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return memo_.size();
}

TileChoice Planner::choose(const kernels::KernelSpec& attention_spec, const plan::AttentionProblem& p) const {
  const TuningKey key = tuning_key(p, attention_spec.family);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
  }
  TileChoice c;
  if (const TuningEntry* e = db().find(key, code_)) {
    kernels::KernelSpec s = attention_spec;
    s.tile = e->tile;
    if (auto why = static_reject_reason(s, max_smem_)) {
      base::log::warn_once("tuning-entry:" + db_path_ + ":" + e->key.str(),
                     "tuning database " + db_path_ + ": the tile " + tile_str(e->tile) + " of " + e->key.str() +
                         " cannot run here (" + *why + "); using the heuristic default");
    } else {
      c.tile = e->tile;
      c.tuned = true;
      c.measured_key = e->key;
    }
  }
  if (!c.tuned) c.tile = heuristic_tile(attention_spec, max_smem_);  // throws when nothing fits: not memoised
  base::log::debug("plan " + key.str() + ": " + tile_str(c.tile) +
             (c.tuned ? " (tuned, measured as " + c.measured_key.str() + ")" : " (heuristic default)"));
  std::unique_lock<std::shared_mutex> lock(mu_);
  return memo_.emplace(key, c).first->second;
}

std::vector<kernels::TileConfig> Planner::tuned_tiles(const kernels::KernelSpec& attention_spec,
                                                     const plan::AttentionProblem& p) const {
  const TuningKey key = tuning_key(p, attention_spec.family);
  std::vector<kernels::TileConfig> tiles;
  for (const TuningEntry& e : db().entries()) {
    if (!e.key.same_specialisation(key) || !code_.matches(e)) continue;
    if (std::find(tiles.begin(), tiles.end(), e.tile) != tiles.end()) continue;
    kernels::KernelSpec s = attention_spec;
    s.tile = e.tile;
    if (!static_reject_reason(s, max_smem_)) tiles.push_back(e.tile);
  }
  return tiles;
}

std::shared_ptr<Planner> shared_planner(const std::string& db_path, const std::string& device_name, kernels::Arch arch,
                                        int max_smem_optin) {
  using Key = std::tuple<std::string, std::string, int, int>;
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<Planner>> planners;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = planners[Key{db_path, device_name, static_cast<int>(arch), max_smem_optin}];
  if (!p) p = std::make_shared<Planner>(db_path, device_name, arch, max_smem_optin);
  return p;
}

std::string context_db_path(const base::config::ContextConfig& c, const std::string& device_name, kernels::Arch arch) {
  if (!c.disk_cache || !c.tuning) return {};
  return db_path(c.cache_dir, device_name, arch);
}

}  // namespace sage2::plan
