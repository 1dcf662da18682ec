// Serialisation of one cache entry (format described in cache/disk_cache.hpp).
// Deserialisation must hold up against any byte string: every length is checked against the
// limits and against the bytes actually present before anything is allocated or read.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "cache/disk_cache.hpp"
#include "base/file_util.hpp"
#include "base/hash.hpp"

namespace sage2::cache {
namespace {
using namespace base::fs;  // the file utilities this file is built on

using json = nlohmann::json;

constexpr char kEntryMagic[8] = {'S', '2', 'C', 'U', 'B', 'I', 'N', '\0'};
constexpr std::size_t kChecksumOffset = 56;
constexpr int kMaxMetaDepth = 8;


bool known_arch(std::uint32_t a) {
  if (a > 1024) return false;
  return std::strcmp(kernels::arch_name(static_cast<kernels::Arch>(a)), "?") != 0;
}

// Every '|'-separated field of the key that names an arch ("sm_...") must name `arch`.
// Returns the offending field, or empty when consistent.
std::string key_arch_conflict(const std::string& key, kernels::Arch arch) {
  const std::string want = kernels::arch_name(arch);
  std::size_t start = 0;
  while (start <= key.size()) {
    std::size_t end = key.find('|', start);
    if (end == std::string::npos) end = key.size();
    const std::string_view field(key.data() + start, end - start);
    if (field.substr(0, 3) == "sm_" && field != want) return std::string(field);
    start = end + 1;
  }
  return {};
}

// A "nvrtc:M.m" field of the key (jit/kernel_build.hpp) must name the NVRTC of the header: an
// entry never claims to be built by another compiler than the one that built it. Returns the
// offending field, or empty when consistent (or when the key has no such field).
std::string key_nvrtc_conflict(const std::string& key, int major, int minor) {
  const std::string want = "nvrtc:" + std::to_string(major) + "." + std::to_string(minor);
  std::size_t start = 0;
  while (start <= key.size()) {
    std::size_t end = key.find('|', start);
    if (end == std::string::npos) end = key.size();
    const std::string_view field(key.data() + start, end - start);
    if (field.substr(0, 6) == "nvrtc:" && field != want) return std::string(field);
    start = end + 1;
  }
  return {};
}

// Rejects JSON nested deeper than kMaxMetaDepth before the parser sees it.
bool nesting_ok(const char* p, std::size_t n) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxMetaDepth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

bool json_int(const json& obj, const char* name, int& out, std::string& why) {
  auto it = obj.find(name);
  if (it == obj.end()) { why = std::string("metadata lacks \"") + name + "\""; return false; }
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
      why = std::string("metadata \"") + name + "\" out of range"; return false;
    }
    out = static_cast<int>(v);
    return true;
  }
  if (it->is_number_integer()) {
    const auto v = it->get<std::int64_t>();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      why = std::string("metadata \"") + name + "\" out of range"; return false;
    }
    out = static_cast<int>(v);
    return true;
  }
  why = std::string("metadata \"") + name + "\" is not an integer";
  return false;
}

bool parse_metadata(const char* p, std::size_t n, jit::CompiledKernel& k, std::string& why) {
  if (!nesting_ok(p, n)) { why = "metadata nested too deeply"; return false; }
  const json meta = json::parse(p, p + n, nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded()) { why = "metadata is not valid JSON"; return false; }
  if (!meta.is_object()) { why = "metadata is not a JSON object"; return false; }

  auto entry = meta.find("entry");
  if (entry == meta.end() || !entry->is_string()) { why = "metadata lacks the entry name"; return false; }
  k.entry = entry->get<std::string>();

  auto secs = meta.find("compile_seconds");
  if (secs == meta.end() || !secs->is_number()) { why = "metadata lacks compile_seconds"; return false; }
  k.compile_seconds = secs->get<double>();

  auto facts = meta.find("facts");
  if (facts == meta.end() || !facts->is_object()) { why = "metadata lacks ptxas facts"; return false; }
  if (!json_int(*facts, "registers", k.facts.registers, why) ||
      !json_int(*facts, "spill_store_bytes", k.facts.spill_store_bytes, why) ||
      !json_int(*facts, "spill_load_bytes", k.facts.spill_load_bytes, why) ||
      !json_int(*facts, "stack_frame_bytes", k.facts.stack_frame_bytes, why) ||
      !json_int(*facts, "static_shared_bytes", k.facts.static_shared_bytes, why) ||
      !json_int(*facts, "constant_bytes", k.facts.constant_bytes, why))
    return false;

  auto log = meta.find("log");
  if (log != meta.end()) {
    if (!log->is_string()) { why = "metadata \"log\" is not a string"; return false; }
    k.log = log->get<std::string>();
  }
  return true;
}

bool parse_entry(const char* d, std::size_t n, jit::CompiledKernel& k, std::string& why) {
  if (d == nullptr && n != 0) { why = "no data"; return false; }
  if (n < kEntryHeaderBytes) {
    why = "truncated: " + std::to_string(n) + " bytes, the header alone needs " +
          std::to_string(kEntryHeaderBytes);
    return false;
  }
  if (std::memcmp(d, kEntryMagic, sizeof kEntryMagic) != 0) { why = "not a sage2 cache entry (bad magic)"; return false; }
  const std::uint32_t version = get_u32(d + 8);
  if (version != kEntryFormatVersion) {
    why = "entry format version " + std::to_string(version) + " (this build reads " +
          std::to_string(kEntryFormatVersion) + ")";
    return false;
  }
  if (get_u32(d + 12) != kEntryHeaderBytes) { why = "unexpected header size"; return false; }
  const std::uint32_t arch = get_u32(d + 16);
  const std::uint32_t nv_major = get_u32(d + 20), nv_minor = get_u32(d + 24);
  const std::uint64_t key_len = get_u32(d + 28), meta_len = get_u32(d + 32);
  const std::uint64_t cubin_len = get_u64(d + 40);
  if (get_u32(d + 36) != 0 || get_u64(d + 48) != 0) { why = "reserved header fields are not zero"; return false; }
  if (key_len == 0 || key_len > kMaxKeyBytes) { why = "key length " + std::to_string(key_len) + " out of range"; return false; }
  if (meta_len > kMaxMetaBytes) { why = "metadata length " + std::to_string(meta_len) + " out of range"; return false; }
  if (cubin_len == 0 || cubin_len > kMaxCubinBytes) {
    why = "cubin length " + std::to_string(cubin_len) + " out of range";
    return false;
  }
  // No overflow: every term is bounded above.
  const std::uint64_t total = kEntryHeaderBytes + key_len + cubin_len + meta_len;
  if (n < total) {
    why = "truncated: " + std::to_string(n) + " bytes, the header declares " + std::to_string(total);
    return false;
  }
  if (n > total) {
    why = std::to_string(n - total) + " unexpected bytes after the declared " + std::to_string(total);
    return false;
  }
  const char* key_p = d + kEntryHeaderBytes;
  const char* cubin_p = key_p + key_len;
  const char* meta_p = cubin_p + cubin_len;
  std::uint64_t h = base::fnv1a64(d, kChecksumOffset);
  h = base::fnv1a64(key_p, key_len, h);
  h = base::fnv1a64(cubin_p, cubin_len, h);
  h = base::fnv1a64(meta_p, meta_len, h);
  if (h != get_u64(d + kChecksumOffset)) { why = "checksum mismatch (corrupted entry)"; return false; }
  if (!known_arch(arch)) { why = "unknown arch code " + std::to_string(arch); return false; }

  jit::CompiledKernel out;
  out.key.assign(key_p, key_len);
  out.arch = static_cast<kernels::Arch>(arch);
  if (auto f = key_arch_conflict(out.key, out.arch); !f.empty()) {
    why = "header arch " + std::string(kernels::arch_name(out.arch)) + " disagrees with the key's " + f;
    return false;
  }
  out.nvrtc_major = static_cast<int>(static_cast<std::int32_t>(nv_major));
  out.nvrtc_minor = static_cast<int>(static_cast<std::int32_t>(nv_minor));
  if (auto f = key_nvrtc_conflict(out.key, out.nvrtc_major, out.nvrtc_minor); !f.empty()) {
    why = "header NVRTC " + std::to_string(out.nvrtc_major) + "." + std::to_string(out.nvrtc_minor) +
          " disagrees with the key's " + f;
    return false;
  }
  if (!parse_metadata(meta_p, meta_len, out, why)) return false;
  out.cubin.assign(cubin_p, cubin_p + cubin_len);
  k = std::move(out);
  return true;
}

}  // namespace

std::vector<char> DiskCache::serialize(const jit::CompiledKernel& k) {
  auto fail = [&](const std::string& why) -> void {
    throw Error(ErrorCode::CacheError, "cannot serialize kernel '" + k.key.substr(0, 200) + "': " + why);
  };
  if (k.key.empty() || k.key.size() > kMaxKeyBytes) fail("key length " + std::to_string(k.key.size()) + " out of range");
  if (k.cubin.empty() || k.cubin.size() > kMaxCubinBytes)
    fail("cubin length " + std::to_string(k.cubin.size()) + " out of range");
  const auto arch = static_cast<std::uint32_t>(static_cast<int>(k.arch));
  if (!known_arch(arch)) fail("unknown arch code " + std::to_string(static_cast<int>(k.arch)));
  if (auto f = key_arch_conflict(k.key, k.arch); !f.empty())
    fail("arch " + std::string(kernels::arch_name(k.arch)) + " disagrees with the key's " + f);
  if (auto f = key_nvrtc_conflict(k.key, k.nvrtc_major, k.nvrtc_minor); !f.empty())
    fail("NVRTC " + std::to_string(k.nvrtc_major) + "." + std::to_string(k.nvrtc_minor) + " disagrees with the key's " + f);

  json facts = {{"registers", k.facts.registers},
                {"spill_store_bytes", k.facts.spill_store_bytes},
                {"spill_load_bytes", k.facts.spill_load_bytes},
                {"stack_frame_bytes", k.facts.stack_frame_bytes},
                {"static_shared_bytes", k.facts.static_shared_bytes},
                {"constant_bytes", k.facts.constant_bytes}};
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  json meta = {{"entry", k.entry},
               {"compile_seconds", std::isfinite(k.compile_seconds) ? k.compile_seconds : 0.0},
               {"facts", std::move(facts)},
               {"log", k.log},
               {"created_unix", static_cast<std::int64_t>(now)}};
#ifdef SAGE2_VERSION
  meta["sage2_version"] = SAGE2_VERSION;
#endif
  // Invalid UTF-8 (a log can carry anything) is replaced rather than failing the store.
  const std::string meta_text = meta.dump(-1, ' ', false, json::error_handler_t::replace);
  if (meta_text.size() > kMaxMetaBytes) fail("metadata of " + std::to_string(meta_text.size()) + " bytes is too large");

  const std::size_t total = kEntryHeaderBytes + k.key.size() + k.cubin.size() + meta_text.size();
  std::vector<char> out(total, 0);
  char* d = out.data();
  std::memcpy(d, kEntryMagic, sizeof kEntryMagic);
  put_u32(d + 8, kEntryFormatVersion);
  put_u32(d + 12, static_cast<std::uint32_t>(kEntryHeaderBytes));
  put_u32(d + 16, arch);
  put_u32(d + 20, static_cast<std::uint32_t>(static_cast<std::int32_t>(k.nvrtc_major)));
  put_u32(d + 24, static_cast<std::uint32_t>(static_cast<std::int32_t>(k.nvrtc_minor)));
  put_u32(d + 28, static_cast<std::uint32_t>(k.key.size()));
  put_u32(d + 32, static_cast<std::uint32_t>(meta_text.size()));
  put_u32(d + 36, 0);
  put_u64(d + 40, k.cubin.size());
  put_u64(d + 48, 0);
  char* p = d + kEntryHeaderBytes;
  std::memcpy(p, k.key.data(), k.key.size());
  p += k.key.size();
  std::memcpy(p, k.cubin.data(), k.cubin.size());
  p += k.cubin.size();
  std::memcpy(p, meta_text.data(), meta_text.size());
  std::uint64_t h = base::fnv1a64(d, kChecksumOffset);
  h = base::fnv1a64(d + kEntryHeaderBytes, total - kEntryHeaderBytes, h);
  put_u64(d + kChecksumOffset, h);
  return out;
}

std::optional<jit::CompiledKernel> DiskCache::try_deserialize(const char* data, std::size_t size,
                                                              std::string* problem) noexcept {
  std::string why;
  try {
    jit::CompiledKernel k;
    if (parse_entry(data, size, k, why)) return k;
  } catch (const std::exception& e) {
    why = std::string("unreadable entry: ") + e.what();
  } catch (...) {
    why = "unreadable entry";
  }
  if (problem) {
    try { *problem = why; } catch (...) {}
  }
  return std::nullopt;
}

jit::CompiledKernel DiskCache::deserialize(const char* data, std::size_t size) {
  std::string why;
  auto k = try_deserialize(data, size, &why);
  if (!k) throw Error(ErrorCode::CacheError, "invalid cache entry: " + why);
  return std::move(*k);
}

jit::CompiledKernel DiskCache::deserialize(const std::vector<char>& bytes) {
  return deserialize(bytes.data(), bytes.size());
}

std::string DiskCache::entry_file_name(const std::string& key) {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.s2c",
                static_cast<unsigned long long>(base::fnv1a64(key.data(), key.size())));
  return name;
}

}  // namespace sage2::cache
