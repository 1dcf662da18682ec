// Writes the seed corpora of the fuzz targets: a few small valid cache entries
// (corpus/fuzz_cache_entry/) and bundles (corpus/fuzz_bundle_import/). Run once, by hand:
//   build-fuzz/fuzz/sage2-fuzz-seeds fuzz/corpus
// The output is committed; libFuzzer adds what it finds to the same folders when run with them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
#include "kernels/kernel_spec.hpp"
#include "base/hash.hpp"

using namespace sage2;
using sage2::cache::DiskCache;

namespace {

jit::CompiledKernel kernel(const std::string& key, kernels::Arch arch, std::size_t cubin_bytes, const std::string& log,
                           unsigned salt) {
  jit::CompiledKernel k;
  k.key = key;
  k.arch = arch;
  k.entry = "sage2_fuzz_seed_" + std::to_string(salt);
  k.cubin.resize(cubin_bytes);
  for (std::size_t i = 0; i < cubin_bytes; ++i) k.cubin[i] = static_cast<char>((i * 131 + salt * 7) & 0xff);
  if (cubin_bytes >= 4) std::memcpy(k.cubin.data(), "\x7f" "ELF", 4);
  k.facts.registers = 40 + static_cast<int>(salt);
  k.facts.spill_load_bytes = static_cast<int>(salt % 3) * 4;
  k.facts.static_shared_bytes = 1024 * static_cast<int>(salt);
  k.facts.constant_bytes = 400;
  k.compile_seconds = 0.125 * salt;
  k.nvrtc_major = 13;
  k.nvrtc_minor = static_cast<int>(salt % 2);
  k.log = log;
  return k;
}

std::string spec_key(kernels::KernelFamily family, kernels::Arch arch, int head_dim, kernels::QuantOp op = kernels::QuantOp::None) {
  kernels::KernelSpec s;
  s.family = family;
  s.arch = arch;
  s.head_dim = head_dim;
  s.op = op;
  return s.key();
}

void put_u64(std::vector<char>& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}

// A bundle built from the documented framing (export_bundle only writes valid, distinct entries).
std::vector<char> bundle(const std::vector<std::vector<char>>& entries) {
  std::vector<char> b = {'S', '2', 'B', 'U', 'N', 'D', 'L', 'E'};
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(cache::kBundleFormatVersion >> (8 * i)));
  for (int i = 0; i < 4; ++i) b.push_back(0);
  put_u64(b, entries.size());
  put_u64(b, base::fnv1a64(b.data(), 24));
  for (const auto& e : entries) {
    put_u64(b, e.size());
    b.insert(b.end(), e.begin(), e.end());
  }
  return b;
}

void write(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("%-60s %6zu bytes\n", path.c_str(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir (fuzz/corpus)>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string ed = root + "/fuzz_cache_entry", bd = root + "/fuzz_bundle_import";
  ::mkdir(root.c_str(), 0755);
  ::mkdir(ed.c_str(), 0755);
  ::mkdir(bd.c_str(), 0755);

  const auto a = kernel(spec_key(kernels::KernelFamily::AttentionMma, kernels::Arch::Sm90a, 128), kernels::Arch::Sm90a, 96,
                        "ptxas info    : Used 168 registers", 1);
  const auto q = kernel(spec_key(kernels::KernelFamily::Quantize, kernels::Arch::Sm89, 64, kernels::QuantOp::QuantizeQ),
                        kernels::Arch::Sm89, 160, "warning: \"quoted\"\n\ttab \xc3\xa9 \\ back", 2);
  const auto d = kernel(spec_key(kernels::KernelFamily::DeltaS, kernels::Arch::Sm90a, 256), kernels::Arch::Sm90a, 32, "", 3);
  const auto tiny = kernel("k", kernels::Arch::Sm89, 1, "", 4);  // a key without an sm_ field
  const auto a89 = kernel(spec_key(kernels::KernelFamily::AttentionMma, kernels::Arch::Sm89, 128), kernels::Arch::Sm89, 96,
                          "", 5);
  const auto ea = DiskCache::serialize(a), eq = DiskCache::serialize(q), ed_ = DiskCache::serialize(d),
             et = DiskCache::serialize(tiny), e89 = DiskCache::serialize(a89);

  write(ed + "/seed-attention-sm90a.s2c", ea);
  write(ed + "/seed-quantize-sm89-escaped-log.s2c", eq);
  write(ed + "/seed-delta-s-sm90a-empty-log.s2c", ed_);
  write(ed + "/seed-tiny-key-1-byte-cubin.s2c", et);
  write(ed + "/seed-attention-sm89.s2c", e89);

  write(bd + "/seed-empty.s2b", bundle({}));
  write(bd + "/seed-one.s2b", bundle({ea}));
  write(bd + "/seed-three-archs.s2b", bundle({ea, eq, e89}));
  // The same key twice with different bytes (a swapped / re-exported entry): the last one wins.
  auto a_again = a;
  a_again.cubin[10] ^= 0x55;
  write(bd + "/seed-duplicate-key.s2b", bundle({ea, DiskCache::serialize(a_again)}));
  // One damaged entry between two good ones: rejected alone.
  auto broken = eq;
  broken[broken.size() / 2] ^= 1;
  write(bd + "/seed-good-bad-good.s2b", bundle({ed_, broken, et}));
  return 0;
}
