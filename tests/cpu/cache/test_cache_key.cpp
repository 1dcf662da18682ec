// Specification: the disk cache key names exactly what is compiled. An entry is found only by a
// process that would hand NVRTC the same complete source (the generated preamble included), the
// same templates and options, and run it with the same NVRTC and library version; any difference
// is a miss (the kernel is recompiled), identical inputs are a hit. The key starts with the
// readable spec key. NVRTC versions here are fakes: the key is a pure function of the inputs.
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cache/disk_cache.hpp"
#include "base/file_util.hpp"
#include "jit/compiler.hpp"
#include "jit/kernel_build.hpp"
#include "test_support.hpp"
#include "base/hash.hpp"

using namespace sage2;
using sage2::cache::DiskCache;
using sage2::jit::KernelBuild;
using sage2::jit::Toolchain;

namespace {

kernels::KernelSpec attention_spec() {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::AttentionMma;
  s.consumer = kernels::KernelFamily::AttentionMma;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = 128;
  return s;
}

kernels::KernelSpec quantize_k_spec() {
  kernels::KernelSpec s;
  s.family = kernels::KernelFamily::Quantize;
  s.op = kernels::QuantOp::QuantizeK;
  s.arch = kernels::Arch::Sm90a;
  s.head_dim = 64;
  return s;
}

const Toolchain kNvrtc13{"0.1.0", 13, 0};
const Toolchain kNvrtc128{"0.1.0", 12, 8};

// What compile(b) would store, without compiling: a stand-in cubin tagged with the key.
jit::CompiledKernel entry_for(const KernelBuild& b) {
  jit::CompiledKernel k;
  k.key = b.key;
  k.arch = b.spec.arch;
  k.entry = b.spec.entry_name();
  k.cubin.assign(b.key.begin(), b.key.end());
  std::memcpy(k.cubin.data(), "\x7f" "ELF", 4);
  k.nvrtc_major = b.toolchain.nvrtc_major;
  k.nvrtc_minor = b.toolchain.nvrtc_minor;
  return k;
}

// The source with one #define's value replaced, as a libsage2 that generates it differently would.
std::string with_define(const std::string& src, const std::string& name, const std::string& value) {
  const std::string tag = "#define " + name + " ";
  const std::size_t at = src.find(tag);
  REQUIRE_MESSAGE(at != std::string::npos, name);
  const std::size_t end = src.find_first_of(" \n", at + tag.size());
  std::string out = src;
  out.replace(at + tag.size(), end - at - tag.size(), value);
  return out;
}

}  // namespace

TEST_CASE("cache key: identical inputs give one key, and what was stored under it is a hit") {
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  const kernels::KernelSpec spec = attention_spec();
  const KernelBuild a = jit::make_build(spec, kNvrtc13);
  const KernelBuild b = jit::make_build(spec, kNvrtc13);
  CHECK(a.source == b.source);
  CHECK(a.key == b.key);
  // Readable prefix: the spec key, the library version; then the code hash and the NVRTC.
  CHECK(a.key.rfind(spec.key() + "|sage2:0.1.0|code:", 0) == 0);
  CHECK(a.key.size() == spec.key().size() + std::string("|sage2:0.1.0|code:").size() + 16 +
                            std::string("|nvrtc:13.0").size());
  CHECK(a.key.substr(a.key.size() - 11) == "|nvrtc:13.0");
  CHECK(a.key == a.stem + "|nvrtc:13.0");

  REQUIRE(cache.store(entry_for(a)));
  const auto got = cache.load_build(b);
  REQUIRE(got.has_value());
  CHECK(got->key == a.key);
  CHECK(got->cubin == entry_for(a).cubin);
}

TEST_CASE("cache key: a changed preamble define is a miss, with the spec unchanged") {
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  for (const kernels::KernelSpec& spec : {attention_spec(), quantize_k_spec()}) {
    CAPTURE(spec.key());
    const KernelBuild old_lib = jit::make_build(spec, kNvrtc13);
    REQUIRE(cache.store(entry_for(old_lib)));
    // A value the generator derives (here the quantization groups), and a define it newly emits.
    const std::string changed = with_define(old_lib.source, "SAGE2_K_GROUPS", "999");
    const std::string added = "#define SAGE2_SOME_NEW_SWITCH 1\n" + old_lib.source;
    for (const std::string& src : {changed, added}) {
      const KernelBuild new_lib = jit::make_build(spec, src, kNvrtc13);
      CHECK(new_lib.key.rfind(spec.key() + "|", 0) == 0);  // same readable prefix ...
      CHECK(new_lib.key != old_lib.key);                  // ... other code
      CHECK_FALSE(cache.load_build(new_lib).has_value());
    }
    CHECK(cache.load_build(jit::make_build(spec, old_lib.source, kNvrtc13)).has_value());
  }
}

TEST_CASE("cache key: another NVRTC version is a miss (fake versions)") {
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  const kernels::KernelSpec spec = quantize_k_spec();
  const KernelBuild by13 = jit::make_build(spec, kNvrtc13);
  REQUIRE(cache.store(entry_for(by13)));
  const KernelBuild by128 = jit::make_build(spec, kNvrtc128);
  CHECK(by128.stem == by13.stem);  // the same code ...
  CHECK(by128.key != by13.key);    // ... from another compiler
  CHECK_FALSE(cache.load_build(by128).has_value());
  CHECK_FALSE(cache.load_build(jit::make_build(spec, Toolchain{"0.1.0", 13, 1})).has_value());
  CHECK(cache.load_build(by13).has_value());
}

TEST_CASE("cache key: other NVRTC options are a miss") {
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  const kernels::KernelSpec spec = quantize_k_spec();
  const KernelBuild base = jit::make_build(spec, kNvrtc13);
  CHECK(base.options == jit::nvrtc_options(spec));
  REQUIRE(cache.store(entry_for(base)));
  std::vector<std::string> more = base.options;
  more.push_back("-lineinfo");
  std::vector<std::string> other = base.options;
  for (auto& o : other)
    if (o == "-ftz=false") o = "-ftz=true";
  std::vector<std::string> fewer(base.options.begin(), base.options.end() - 1);
  for (const auto& opts : {more, other, fewer}) {
    const KernelBuild b = jit::make_build(spec, base.source, opts, kNvrtc13);
    CHECK(b.key != base.key);
    CHECK_FALSE(cache.load_build(b).has_value());
  }
  CHECK(cache.load_build(jit::make_build(spec, base.source, base.options, kNvrtc13)).has_value());
}

TEST_CASE("cache key: another library version is a miss") {
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  const kernels::KernelSpec spec = quantize_k_spec();
  const KernelBuild old_lib = jit::make_build(spec, kNvrtc13);
  REQUIRE(cache.store(entry_for(old_lib)));
  const KernelBuild new_lib = jit::make_build(spec, Toolchain{"0.2.0", 13, 0});
  CHECK(new_lib.source == old_lib.source);  // even when the source happens to be the same
  CHECK(new_lib.key != old_lib.key);
  CHECK_FALSE(cache.load_build(new_lib).has_value());
}

TEST_CASE("cache key: an entry whose header names another NVRTC than its key is refused") {
  const KernelBuild b = jit::make_build(quantize_k_spec(), kNvrtc13);
  jit::CompiledKernel k = entry_for(b);
  k.nvrtc_minor = 8;
  CHECK_THROWS_AS(DiskCache::serialize(k), Error);  // never written ...
  // ... and never read: a valid entry with the header's NVRTC field rewritten (checksum redone).
  k.nvrtc_minor = 0;
  std::vector<char> bytes = DiskCache::serialize(k);
  base::fs::put_u32(bytes.data() + 24, 8);
  std::uint64_t h = base::fnv1a64(bytes.data(), 56);
  h = base::fnv1a64(bytes.data() + 64, bytes.size() - 64, h);
  base::fs::put_u64(bytes.data() + 56, h);
  std::string why;
  CHECK_FALSE(DiskCache::try_deserialize(bytes.data(), bytes.size(), &why).has_value());
  CHECK(why.find("nvrtc:13.0") != std::string::npos);
}

TEST_CASE("cache key: without NVRTC, the entry of the same code built by any NVRTC is used, the newest first") {
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  const kernels::KernelSpec spec = quantize_k_spec();
  const Toolchain none{"0.1.0", 0, 0};
  CHECK_FALSE(none.has_nvrtc());
  CHECK_FALSE(cache.load_build(jit::make_build(spec, none)).has_value());  // empty cache
  REQUIRE(cache.store(entry_for(jit::make_build(spec, kNvrtc128))));
  REQUIRE(cache.store(entry_for(jit::make_build(spec, kNvrtc13))));
  const auto got = cache.load_build(jit::make_build(spec, none));
  REQUIRE(got.has_value());
  CHECK(got->key == jit::make_build(spec, kNvrtc13).key);
  CHECK(got->nvrtc_major == 13);
  // Other code is still a miss: only the compiler is left open.
  const std::string changed = "#define SAGE2_SOME_NEW_SWITCH 1\n" + jit::generate_source(spec);
  CHECK_FALSE(cache.load_build(jit::make_build(spec, changed, none)).has_value());
  CHECK_FALSE(cache.load_build(jit::make_build(spec, Toolchain{"0.2.0", 0, 0})).has_value());
}

TEST_CASE("cache key: a real compile carries its build's key; a build for another NVRTC is not compiled") {
  REQUIRE_MESSAGE(jit::nvrtc_version().first >= 12, "NVRTC must be loadable for the CPU suite");
  test::TempDir tmp("sage2-cache-key");
  const DiskCache cache(tmp.path);
  const kernels::KernelSpec spec = quantize_k_spec();
  const Toolchain here = Toolchain::current();
  CHECK(here.library == version_info().library);
  CHECK(here.nvrtc_major == jit::nvrtc_version().first);
  const KernelBuild b = jit::make_build(spec);
  CHECK(b.source == jit::generate_source(spec));
  const jit::CompiledKernel k = jit::compile(b);
  CHECK(k.key == b.key);
  CHECK(k.key.substr(k.key.size() - here.nvrtc_str().size()) == here.nvrtc_str());
  CHECK(k.nvrtc_major == here.nvrtc_major);
  CHECK(k.nvrtc_minor == here.nvrtc_minor);
  CHECK(jit::compile(spec).key == b.key);  // the spec-level entry point builds the same
  REQUIRE(cache.store(k));
  const auto again = cache.load_build(jit::make_build(spec));  // as the next process would
  REQUIRE(again.has_value());
  CHECK(again->cubin == k.cubin);
  // A build whose key names another NVRTC than the loaded one would store a lie: refused.
  const Toolchain fake{here.library, here.nvrtc_major + 1, 0};
  try {
    (void)jit::compile(jit::make_build(spec, fake));
    FAIL("compiled a build made for another NVRTC");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Internal);
  }
}
