// Tuning database: JSON schema, strict parsing, lookups, and the locked merge + atomic write.
#include "plan/tuning_db.hpp"
#include "base/file_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "plan/candidates.hpp"
#include "kernels/attention_family.hpp"
#include "jit/kernel_build.hpp"
#include "base/log.hpp"
#include "base/hash.hpp"
#include "base/enum_names.hpp"

#ifndef SAGE2_VERSION
#define SAGE2_VERSION "unknown"
#endif

namespace sage2::plan {
namespace {
using namespace base::fs;  // the file utilities this file is built on

using nlohmann::json;

constexpr const char* kTempPrefix = ".tuning-tmp-";
constexpr const char* kTempSuffix = ".json-partial";
constexpr double kStaleTempSeconds = 600;

std::int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string hex_n(std::uint64_t v, int digits) {
  char b[17];
  std::snprintf(b, sizeof b, "%0*llx", digits, static_cast<unsigned long long>(v));
  return std::string(b).substr(0, static_cast<std::size_t>(digits));
}

// ---- strict JSON field access ------------------------------------------------------------------
struct Bad {
  std::string why;
};

const json& field(const json& o, const char* name, const std::string& where) {
  auto it = o.find(name);
  if (it == o.end()) throw Bad{where + ": missing field '" + name + "'"};
  return *it;
}
std::int64_t get_int(const json& o, const char* name, const std::string& where, std::int64_t lo, std::int64_t hi) {
  const json& v = field(o, name, where);
  if (!v.is_number_integer()) throw Bad{where + ": '" + name + "' is not an integer"};
  std::int64_t x;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) throw Bad{where + ": '" + name + "' is out of range"};
    x = static_cast<std::int64_t>(u);
  } else {
    x = v.get<std::int64_t>();
  }
  if (x < lo || x > hi)
    throw Bad{where + ": '" + name + "'=" + std::to_string(x) + " outside " + std::to_string(lo) + ".." +
              std::to_string(hi)};
  return x;
}
double get_num(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_number()) throw Bad{where + ": '" + name + "' is not a number"};
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) throw Bad{where + ": '" + name + "' must be finite and >= 0"};
  return x;
}
bool get_bool(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_boolean()) throw Bad{where + ": '" + name + "' is not a boolean"};
  return v.get<bool>();
}
std::string get_str(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_string()) throw Bad{where + ": '" + name + "' is not a string"};
  return v.get<std::string>();
}
const json& get_obj(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_object()) throw Bad{where + ": '" + name + "' is not an object"};
  return v;
}

bool arch_from_name(const std::string& s, kernels::Arch& out) {
  for (const kernels::ArchInfo& a : kernels::arch_table())
    if (s == a.name) {
      out = a.arch;
      return true;
    }
  return false;
}

kernels::TileConfig get_tile(const json& o, const std::string& where) {
  kernels::TileConfig t;
  t.bq = static_cast<int>(get_int(o, "bq", where, 1, 4096));
  t.bk = static_cast<int>(get_int(o, "bk", where, 1, 4096));
  t.warps = static_cast<int>(get_int(o, "warps", where, 1, 64));
  t.stages = static_cast<int>(get_int(o, "stages", where, 1, 64));
  return t;
}

// Written with ordered_json: the header first, fields in the documented order (easier to read).
using ojson = nlohmann::ordered_json;

ojson tile_json(const kernels::TileConfig& t) {
  return ojson{{"bq", t.bq}, {"bk", t.bk}, {"warps", t.warps}, {"stages", t.stages}};
}

TuningEntry parse_entry(const json& e, const std::string& where, kernels::Arch arch) {
  if (!e.is_object()) throw Bad{where + " is not an object"};
  TuningEntry t;
  const std::string family = get_str(e, "family", where);
  const auto fam = kernels::parse_attention_family(family);
  if (!fam || family != kernels::family_name(*fam)) throw Bad{where + ": family '" + family + "' is not tunable"};
  t.key.family = *fam;
  t.key.head_dim = static_cast<int>(get_int(e, "head_dim", where, 1, 512));
  t.key.causal = get_bool(e, "causal", where);
  t.key.qk_bits = static_cast<int>(get_int(e, "qk_bits", where, 4, 8));
  if (t.key.qk_bits != 4 && t.key.qk_bits != 8) throw Bad{where + ": qk_bits must be 4 or 8"};
  t.key.smooth_q = get_bool(e, "smooth_q", where);
  t.key.smooth_k = get_bool(e, "smooth_k", where);
  t.key.smooth_v = get_bool(e, "smooth_v", where);
  t.key.pv_fp16 = e.contains("pv_fp16") && get_bool(e, "pv_fp16", where);  // absent: FP8 (older files)
  t.key.pv_acc16 = e.contains("pv_acc16") && get_bool(e, "pv_acc16", where);  // absent: fp32 (older files)
  const std::string dt = get_str(e, "dtype", where);
  const std::optional<DType> d = base::value_named(dt, base::kDTypeNames);
  if (!d || *d == DType::F32) throw Bad{where + ": dtype '" + dt + "' (f16 or bf16)"};
  t.key.dtype = *d;
  t.key.q_bucket = static_cast<int>(get_int(e, "q_bucket", where, kMinSeqBucket, kMaxSeqBucket));
  t.key.kv_bucket = static_cast<int>(get_int(e, "kv_bucket", where, kMinSeqBucket, kMaxSeqBucket));
  t.key.gqa_bucket = static_cast<int>(get_int(e, "gqa_bucket", where, 1, kMaxGqaBucket));
  if (!is_seq_bucket(t.key.q_bucket) || !is_seq_bucket(t.key.kv_bucket) || !is_gqa_bucket(t.key.gqa_bucket))
    throw Bad{where + ": size buckets must be powers of two"};
  t.tile = get_tile(get_obj(e, "tile", where), where + ".tile");
  // The tile must be one the family can run at all (shared memory is checked per device later).
  Specialisation s;
  s.head_dim = t.key.head_dim;
  s.quant() = t.key.quant();
  s.dtype = t.key.dtype;
  s.pv() = t.key.pv();
  s.family = t.key.family;
  if (auto why = static_reject_reason(s.attention_spec(arch, t.tile), INT_MAX))
    throw Bad{where + ": tile " + tile_str(t.tile) + " is not valid: " + *why};
  t.ms = get_num(e, "ms", where);
  t.tops = get_num(e, "tops", where);
  const json& h = get_obj(e, "heuristic", where);
  t.heuristic_tile = get_tile(get_obj(h, "tile", where + ".heuristic"), where + ".heuristic.tile");
  t.heuristic_ms = get_num(h, "ms", where + ".heuristic");
  t.heuristic_tops = get_num(h, "tops", where + ".heuristic");
  const json& p = get_obj(e, "problem", where);
  const std::int64_t big = std::int64_t(1) << 40;
  t.batch = get_int(p, "batch", where + ".problem", 1, big);
  t.q_heads = get_int(p, "q_heads", where + ".problem", 1, big);
  t.kv_heads = get_int(p, "kv_heads", where + ".problem", 1, big);
  t.q_len = get_int(p, "q_len", where + ".problem", 1, big);
  t.kv_len = get_int(p, "kv_len", where + ".problem", 1, big);
  const json& c = get_obj(e, "candidates", where);
  t.timed = static_cast<int>(get_int(c, "timed", where + ".candidates", 0, 1 << 20));
  t.rejected = static_cast<int>(get_int(c, "rejected", where + ".candidates", 0, 1 << 20));
  t.code_version = get_str(e, "code_version", where);
  t.driver_version = static_cast<int>(get_int(e, "driver_version", where, 0, INT_MAX));
  t.nvrtc_version = get_str(e, "nvrtc_version", where);
  t.tuned_unix = get_int(e, "tuned_unix", where, 0, INT64_MAX);
  return t;
}

ojson entry_json(const TuningEntry& t) {
  return ojson{
      {"family", kernels::family_name(t.key.family)},
      {"head_dim", t.key.head_dim},
      {"causal", t.key.causal},
      {"qk_bits", t.key.qk_bits},
      {"smooth_q", t.key.smooth_q},
      {"smooth_k", t.key.smooth_k},
      {"smooth_v", t.key.smooth_v},
      {"dtype", dtype_name(t.key.dtype)},
      {"pv_fp16", t.key.pv_fp16},
      {"pv_acc16", t.key.pv_acc16},
      {"q_bucket", t.key.q_bucket},
      {"kv_bucket", t.key.kv_bucket},
      {"gqa_bucket", t.key.gqa_bucket},
      {"tile", tile_json(t.tile)},
      {"ms", t.ms},
      {"tops", t.tops},
      {"heuristic", {{"tile", tile_json(t.heuristic_tile)}, {"ms", t.heuristic_ms}, {"tops", t.heuristic_tops}}},
      {"problem",
       {{"batch", t.batch}, {"q_heads", t.q_heads}, {"kv_heads", t.kv_heads}, {"q_len", t.q_len}, {"kv_len", t.kv_len}}},
      {"candidates", {{"timed", t.timed}, {"rejected", t.rejected}}},
      {"code_version", t.code_version},
      {"driver_version", t.driver_version},
      {"nvrtc_version", t.nvrtc_version},
      {"tuned_unix", t.tuned_unix},
  };
}

// ---- files -------------------------------------------------------------------------------------
bool write_atomic(const std::string& path, const std::string& text, std::string& why) {
  const std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  return base::fs::write_file_atomic(parent_dir(path), name, text.data(), text.size(), kTempPrefix, kTempSuffix,
                                      why);
}

// Removes this module's temporary files older than kStaleTempSeconds (left by a killed writer).
void sweep_stale_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const double now = static_cast<double>(now_unix());
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(kTempPrefix, 0) != 0 || name.size() < std::strlen(kTempSuffix) ||
        name.compare(name.size() - std::strlen(kTempSuffix), std::string::npos, kTempSuffix) != 0)
      continue;
    const std::string p = join(dir, name);
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        now - static_cast<double>(st.st_mtim.tv_sec) > kStaleTempSeconds)
      ::unlink(p.c_str());
  }
  ::closedir(d);
}

}  // namespace

std::string library_version() { return SAGE2_VERSION; }

std::string current_code_version() { return jit::code_version(library_version()); }

CodeIdentity CodeIdentity::current() { return {current_code_version(), jit::Toolchain::current().nvrtc_str()}; }

bool CodeIdentity::matches(const TuningEntry& e) const {
  return e.code_version == code_version && (nvrtc_version.empty() || e.nvrtc_version == nvrtc_version);
}

std::string db_file_name(const std::string& device_name, kernels::Arch arch) {
  std::string slug;
  for (char ch : device_name) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) slug += static_cast<char>(std::tolower(c));
    else if (!slug.empty() && slug.back() != '-') slug += '-';
    if (slug.size() >= 40) break;
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.empty()) slug = "device";
  return "tuning-v" + std::to_string(kTuningSchemaVersion) + "-" + slug + "-" +
         hex_n(base::fnv1a64(device_name.data(), device_name.size()), 8) + "-" + kernels::arch_name(arch) + ".json";
}

std::string db_path(const std::string& cache_dir, const std::string& device_name, kernels::Arch arch) {
  return join(cache_dir, db_file_name(device_name, arch));
}

const char* db_status_name(DbStatus s) noexcept {
  switch (s) {
    case DbStatus::Ok: return "ok";
    case DbStatus::Missing: return "missing";
    case DbStatus::Unreadable: return "unreadable";
    case DbStatus::Corrupt: return "corrupt";
    case DbStatus::WrongSchema: return "wrong_schema";
    case DbStatus::Foreign: return "foreign";
  }
  return "?";
}

DbReadResult parse_db(const std::string& text, const std::string& device_name, kernels::Arch arch) {
  DbReadResult r;
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    r.status = DbStatus::Corrupt;
    r.problem = std::string("not valid JSON (") + e.what() + ")";
    return r;
  }
  try {
    if (!j.is_object()) throw Bad{"the top level is not an object"};
    auto schema = j.find("schema");
    if (schema == j.end() || !schema->is_string() || schema->get<std::string>() != kTuningSchemaName) {
      r.status = DbStatus::WrongSchema;
      r.problem = std::string("not a sage2 tuning database (no \"schema\": \"") + kTuningSchemaName + "\")";
      return r;
    }
    auto version = j.find("schema_version");
    if (version == j.end() || !version->is_number_integer() || version->get<std::int64_t>() != kTuningSchemaVersion) {
      r.status = DbStatus::WrongSchema;
      r.problem = "schema version " + (version == j.end() ? std::string("(none)") : version->dump()) +
                  "; this build reads version " + std::to_string(kTuningSchemaVersion);
      return r;
    }
    const json& dev = get_obj(j, "device", "header");
    r.info.device_name = get_str(dev, "name", "device");
    const std::string arch_s = get_str(dev, "arch", "device");
    if (!arch_from_name(arch_s, r.info.arch)) throw Bad{"device: unknown arch '" + arch_s + "'"};
    if (r.info.device_name != device_name || r.info.arch != arch) {
      r.status = DbStatus::Foreign;
      r.problem = "it belongs to device '" + r.info.device_name + "' (" + arch_s + "), not '" + device_name + "' (" +
                  kernels::arch_name(arch) + ")";
      return r;
    }
    r.info.sm_count = static_cast<int>(get_int(dev, "sm_count", "device", 0, INT_MAX));
    r.info.driver_version = static_cast<int>(get_int(j, "driver_version", "header", 0, INT_MAX));
    r.info.nvrtc_version = get_str(j, "nvrtc_version", "header");
    r.info.library_version = get_str(j, "library_version", "header");
    r.info.updated_unix = get_int(j, "updated_unix", "header", 0, INT64_MAX);
    const json& entries = field(j, "entries", "header");
    if (!entries.is_array()) throw Bad{"'entries' is not an array"};
    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      TuningEntry e = parse_entry(entries[i], "entry " + std::to_string(i), arch);
      const std::string k = e.key.str();
      if (!seen.emplace(k, i).second)
        throw Bad{"entry " + std::to_string(i) + " repeats the key " + k + " of entry " + std::to_string(seen[k])};
      r.entries.push_back(std::move(e));
    }
  } catch (const Bad& b) {
    r = DbReadResult{};
    r.status = DbStatus::Corrupt;
    r.problem = b.why;
    return r;
  } catch (const std::exception& e) {  // a JSON type error not caught by the checks above
    r = DbReadResult{};
    r.status = DbStatus::Corrupt;
    r.problem = e.what();
    return r;
  }
  r.status = DbStatus::Ok;
  return r;
}

DbReadResult read_db(const std::string& path, const std::string& device_name, kernels::Arch arch) {
  DbReadResult r;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return r;  // Missing
    r.status = DbStatus::Unreadable;
    r.problem = "cannot open: " + errno_text(errno);
    return r;
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    r.status = DbStatus::Unreadable;
    r.problem = "not a regular file";
    return r;
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxDbBytes) {
    r.status = DbStatus::Corrupt;
    r.problem = "file of " + std::to_string(st.st_size) + " bytes exceeds the " + std::to_string(kMaxDbBytes) +
                "-byte limit";
    return r;
  }
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      r.status = DbStatus::Unreadable;
      r.problem = "read failed: " + errno_text(errno);
      return r;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return parse_db(text, device_name, arch);
}

DbReadResult load_db(const std::string& path, const std::string& device_name, kernels::Arch arch) {
  DbReadResult r = read_db(path, device_name, arch);
  if (r.status != DbStatus::Ok && r.status != DbStatus::Missing)
    base::log::warn_once("tuning-db:" + path, "tuning database " + path + " is not usable (" + db_status_name(r.status) +
                                            ": " + r.problem + "); it is ignored and the heuristic defaults are used");
  return r;
}

std::string serialize_db(const DbInfo& info, std::vector<TuningEntry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const TuningEntry& a, const TuningEntry& b) { return a.key.str() < b.key.str(); });
  ojson j = {
      {"schema", kTuningSchemaName},
      {"schema_version", kTuningSchemaVersion},
      {"device", {{"name", info.device_name}, {"arch", kernels::arch_name(info.arch)}, {"sm_count", info.sm_count}}},
      {"driver_version", info.driver_version},
      {"nvrtc_version", info.nvrtc_version},
      {"library_version", info.library_version},
      {"updated_unix", info.updated_unix},
      {"entries", ojson::array()},
  };
  for (const auto& e : entries) j["entries"].push_back(entry_json(e));
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

const TuningEntry* TuningDb::find(const TuningKey& key, const CodeIdentity& code, int max_distance) const {
  // Between measured sizes only: a key below the smallest or above the largest bucket measured on
  // an axis gets no entry (session 12 r5: a tile chosen at N 1024 ran 1.5 % slower at 512).
  int lo[3] = {INT_MAX, INT_MAX, INT_MAX}, hi[3] = {0, 0, 0};
  for (const auto& e : entries_) {
    if (!e.key.same_specialisation(key) || !code.matches(e)) continue;
    const int b[3] = {e.key.q_bucket, e.key.kv_bucket, e.key.gqa_bucket};
    for (int i = 0; i < 3; ++i) {
      lo[i] = std::min(lo[i], b[i]);
      hi[i] = std::max(hi[i], b[i]);
    }
  }
  const int kb[3] = {key.q_bucket, key.kv_bucket, key.gqa_bucket};
  for (int i = 0; i < 3; ++i)
    if (kb[i] < lo[i] || kb[i] > hi[i]) return nullptr;
  const TuningEntry* best = nullptr;
  int best_d = INT_MAX;
  for (const auto& e : entries_) {
    if (!e.key.same_specialisation(key) || !code.matches(e)) continue;
    const int d = bucket_distance(e.key, key);
    if (d > max_distance) continue;
    bool better = d < best_d;
    if (!better && d == best_d && best) {
      const auto rank = [](const TuningKey& k) { return std::make_tuple(k.q_bucket, k.kv_bucket, k.gqa_bucket); };
      better = rank(e.key) > rank(best->key);
    }
    if (better) {
      best = &e;
      best_d = d;
    }
  }
  return best;
}

DbWriteResult merge_into_db(const std::string& path, const DbInfo& info, const std::vector<TuningEntry>& updates) {
  DbWriteResult w;
  try {
    const std::string dir = parent_dir(path);
    if (int e = make_dirs(dir, 0700)) {  // the kernel cache's folder: private (cache/disk_cache.hpp)
      w.problem = "cannot create directory " + dir + ": " + errno_text(e);
      return w;
    }
    const std::string lock_path = path + ".lock";
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.fd < 0) {
      w.problem = "cannot open the lock file " + lock_path + ": " + errno_text(errno);
      return w;
    }
    while (::flock(lock.fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      if (errno == ENOLCK || errno == EOPNOTSUPP) {
        base::log::warn_once("tuning-db-nolock:" + lock_path, "cannot lock " + lock_path + " (" + errno_text(errno) +
                                                            "); writing the tuning database without a lock");
        break;
      }
      w.problem = "cannot lock " + lock_path + ": " + errno_text(errno);
      return w;
    }
    // Under the lock: what is there now (another process may have written since we last looked).
    DbReadResult cur = read_db(path, info.device_name, info.arch);
    w.previous = cur.status;
    w.previous_problem = cur.problem;
    std::vector<TuningEntry> entries;
    if (cur.status == DbStatus::Ok) {
      entries = std::move(cur.entries);
    } else if (cur.status != DbStatus::Missing) {
      base::log::warn_once("tuning-db:" + path, "tuning database " + path + " is not usable (" +
                                              db_status_name(cur.status) + ": " + cur.problem +
                                              "); it is replaced by a new one");
    }
    for (const auto& u : updates) {
      auto it = std::find_if(entries.begin(), entries.end(), [&](const TuningEntry& e) { return e.key == u.key; });
      if (it != entries.end()) *it = u;
      else entries.push_back(u);
    }
    DbInfo header = info;
    if (header.updated_unix == 0) header.updated_unix = now_unix();
    w.entries = entries.size();
    const std::string text = serialize_db(header, std::move(entries));
    if (!write_atomic(path, text, w.problem)) return w;
    sweep_stale_temps(dir);
    w.ok = true;
  } catch (const std::exception& e) {
    w.ok = false;
    w.problem = e.what();
  }
  return w;
}

}  // namespace sage2::plan
