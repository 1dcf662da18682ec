// Specification: the generated source carries the spec as SAGE2_* constants and the per-thread
// quantization layout as tables produced by kernels::quant_layout (one source of truth); templates
// are self-contained; the quantize parameter struct is plain C++ shared with the host; launch
// shapes match the kernels' compile-time configuration and stay within grid limits; ptxas
// facts are parsed from NVRTC logs.

// A global `i8` in the host program must not clash with the device typedefs (they live in
// namespace sage2::dev on the host).
struct i8 {
  int not_a_device_type;
};

#include <doctest/doctest.h>

#include <filesystem>

#include <regex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "jit/compiler.hpp"
#include "jit/embedded_templates.hpp"
#include "kernels/quantize_shape.hpp"
#include "jit/nvrtc_library.hpp"
#include "kernels/quant_buffers.hpp"
#include "kernels/quant_layout.hpp"
#include "templates/quantize_params.cuh"

using namespace sage2;
using namespace sage2::jit;
using namespace sage2::kernels;

namespace {

KernelSpec quant(QuantOp op, int head_dim = 128, int bits = 8, KernelFamily consumer = KernelFamily::AttentionMma,
                 TileConfig tile = {}) {
  KernelSpec s;
  s.family = KernelFamily::Quantize;
  s.op = op;
  s.head_dim = head_dim;
  s.qk_bits = bits;
  s.consumer = consumer;
  s.tile = tile;
  return s;
}

// The integers of `name[...] = { ... };` in a generated source.
std::vector<int> parse_table(const std::string& src, const std::string& name) {
  const std::size_t at = src.find(name + "[");
  REQUIRE(at != std::string::npos);
  const std::size_t open = src.find('{', at), close = src.find('}', at);
  REQUIRE(open != std::string::npos);
  REQUIRE(close != std::string::npos);
  std::vector<int> v;
  std::string body = src.substr(open + 1, close - open - 1);
  std::regex num("-?[0-9]+");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), num); it != std::sregex_iterator(); ++it)
    v.push_back(std::stoi(it->str()));
  return v;
}

long long define_value(const std::string& src, const std::string& name) {
  std::smatch m;
  const std::regex re("#define " + name + " (-?[0-9]+)");
  REQUIRE_MESSAGE(std::regex_search(src, m, re), name);
  return std::stoll(m[1].str());
}

}  // namespace

TEST_CASE("jit: templates include no toolkit header and only embedded templates") {
  std::set<std::string> names;
  for (const auto& t : embedded_templates()) names.insert(std::string(t.name));
  for (const char* required : {"types.cuh", "ptx.cuh", "quantize_common.cuh", "quantize_qk.cuh", "quantize_params.cuh"})
    CHECK_MESSAGE(names.count(required), required);
  const std::regex inc("#include\\s*([<\"])([^>\"]+)[>\"]");
  for (const auto& t : embedded_templates()) {
    const std::string text(t.text);
    INFO(t.name);
    CHECK(text.find("#include <") == std::string::npos);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), inc); it != std::sregex_iterator(); ++it) {
      CHECK((*it)[1].str() == "\"");
      CHECK_MESSAGE(names.count((*it)[2].str()), "includes a non-embedded file " << (*it)[2].str());
    }
  }
}

TEST_CASE("jit: generate_source emits the spec constants and the layout tables of quant_layout") {
  struct Case {
    KernelSpec spec;
  };
  const std::vector<KernelSpec> specs = {
      quant(QuantOp::QuantizeQ, 128, 8),
      quant(QuantOp::QuantizeQ, 40, 4),
      quant(QuantOp::QuantizeQ, 80, 8, KernelFamily::AttentionWgmma, TileConfig{128, 128, 8, 1}),
      quant(QuantOp::QuantizeQ, 256, 8, KernelFamily::AttentionWgmma, TileConfig{128, 64, 4, 1}),
      quant(QuantOp::QuantizeK, 512, 4, KernelFamily::AttentionMma, TileConfig{256, 128, 8, 1}),
      quant(QuantOp::QuantizeQ, 1, 8, KernelFamily::AttentionMma, TileConfig{64, 32, 2, 1}),
  };
  for (const KernelSpec& s : specs) {
    INFO(s.key());
    const std::string src = generate_source(s);
    const QuantLayout l = quant_layout(s.canonical());
    CHECK(parse_table(src, "sage2_q_group_table") == q_group_table(l));
    std::vector<int> kt;
    for (int i = 0; i < l.bk; ++i) kt.push_back(l.k_group(i));
    CHECK(parse_table(src, "sage2_k_group_table") == kt);
    CHECK(define_value(src, "SAGE2_Q_GROUPS") == l.q_groups_per_block());
    CHECK(define_value(src, "SAGE2_K_GROUPS") == l.k_groups_per_block());
    CHECK(define_value(src, "SAGE2_MMA_SHAPE") == static_cast<int>(l.shape));
    CHECK(define_value(src, "SAGE2_HEAD_DIM") == s.head_dim);
    CHECK(define_value(src, "SAGE2_D_QK") == qk_dim_padded(s.head_dim, s.qk_bits));
    CHECK(define_value(src, "SAGE2_ROW_BYTES") == qk_row_bytes(s.head_dim, s.qk_bits));
    CHECK(define_value(src, "SAGE2_D_V") == v_dim_padded(s.head_dim));
    CHECK(define_value(src, "SAGE2_BQ") == s.tile.bq);
    CHECK(define_value(src, "SAGE2_BK") == s.tile.bk);
    CHECK(define_value(src, "SAGE2_WARPS") == s.tile.warps);
    CHECK(define_value(src, "SAGE2_QK_BITS") == s.qk_bits);
    CHECK(define_value(src, "SAGE2_QUANT_OP") == static_cast<int>(s.op));
    CHECK(define_value(src, "SAGE2_ARCH") == 90);
    CHECK(define_value(src, "SAGE2_SMOOTH_K") == 1);
    CHECK(define_value(src, "SAGE2_IN_BF16") == 0);
    CHECK(define_value(src, "SAGE2_CONSUMER_WGMMA") == (s.consumer == KernelFamily::AttentionWgmma));
    const QuantizeKernelConfig c = quantize_kernel_config(s);
    CHECK(define_value(src, "SAGE2_QZ_THREADS") == c.threads);
    CHECK(define_value(src, "SAGE2_QZ_ROWS") == c.rows);
    CHECK(define_value(src, "SAGE2_QZ_TPR") == c.tpr);
    CHECK(define_value(src, "SAGE2_QZ_CPT") == c.cpt);
    CHECK(define_value(src, "SAGE2_QZ_CHUNKS") == c.chunks);
    CHECK(src.find(s.key()) != std::string::npos);
    CHECK(src.rfind("#include \"quantize_qk.cuh\"") != std::string::npos);
  }
  // mma: rows {i, i+8, i+16, i+24} of a warp share a scale (DESIGN.md), here in the table.
  const std::vector<int> t = parse_table(generate_source(quant(QuantOp::QuantizeQ)), "sage2_q_group_table");
  CHECK(t[0] == t[8]);
  CHECK(t[8] == t[16]);
  CHECK(t[16] == t[24]);
  CHECK(t[0] != t[1]);
  CHECK(t[0] != t[32]);
}

TEST_CASE("jit: specs with one key generate one source; code-relevant fields change it") {
  KernelSpec a = quant(QuantOp::QuantizeK);
  KernelSpec b = a;
  b.smooth_q = true;  // irrelevant to K
  b.causal = CausalMode::TopLeft;
  CHECK(a.key() == b.key());
  CHECK(generate_source(a) == generate_source(b));
  KernelSpec c = a;
  c.in_dtype = DType::BF16;
  CHECK(generate_source(a) != generate_source(c));
  CHECK(define_value(generate_source(c), "SAGE2_IN_BF16") == 1);
  KernelSpec d = a;
  d.arch = Arch::Sm89;
  CHECK(define_value(generate_source(d), "SAGE2_ARCH") == 89);
}

TEST_CASE("jit: generate_source validates the spec") {
  KernelSpec s = quant(QuantOp::QuantizeQ);
  s.head_dim = 0;
  CHECK_THROWS_AS(generate_source(s), Error);
  s = quant(QuantOp::None);
  CHECK_THROWS_AS(generate_source(s), Error);
}

TEST_CASE("jit: NVRTC options compile real-arch cubins with ptxas verbosity and no include paths") {
  for (Arch a : {Arch::Sm89, Arch::Sm90a}) {
    KernelSpec s = quant(QuantOp::QuantizeQ);
    s.arch = a;
    const auto opts = nvrtc_options(s);
    std::string all;
    for (const auto& o : opts) all += o + " ";
    CHECK(all.find(std::string("--gpu-architecture=") + arch_name(a) + " ") != std::string::npos);
    CHECK(all.find("compute_") == std::string::npos);
    CHECK(all.find("-std=c++17") != std::string::npos);
    CHECK(all.find("--ptxas-options=-v") != std::string::npos);
    CHECK(all.find("-default-device") != std::string::npos);
    CHECK(all.find("-I") == std::string::npos);
    CHECK(all.find("--include-path") == std::string::npos);
    CHECK(all.find("fast-math") == std::string::npos);
  }
  const auto v = nvrtc_version();
  CHECK(v.first >= 12);
}

TEST_CASE("jit: quantize_params.cuh is one plain C++ definition shared with the host") {
  using P = sage2::dev::QuantizeParams;
  static_assert(std::is_standard_layout_v<P>);
  static_assert(std::is_trivially_copyable_v<P>);
  static_assert(sizeof(P) == 65 * 8,
                "3 input pointers, 9 strides, 5 sizes, 12 output pointers, 3 flag pointers, 2 fused-stage "
                "pointers, the schedule lag, the cluster chunk; varlen: 6 pointers, 4 sizes, the output "
                "(pointer, 2 sizes, 3 strides) and the LSE (pointer, count); mask: pointer, 4 strides, the "
                "class table, its head count, the constant tiles' terms; sampled statistics: 2 pointers and "
                "the L2 hints switch (padded to 8 bytes)");
  static_assert(std::is_same_v<sage2::dev::i64, long long>);
  static_assert(sizeof(::i8) == sizeof(int));  // the test's own global i8 is untouched
  P p{};
  CHECK(p.q == nullptr);
  CHECK(p.kv_len == 0);
}

TEST_CASE("jit: quantize kernel configuration is consistent for every op and head dim") {
  for (int d = 1; d <= 512; d += (d < 16 ? 1 : 7)) {
    for (int bits : {4, 8}) {
      for (TileConfig t : {TileConfig{128, 64, 4, 1}, TileConfig{64, 128, 4, 1}, TileConfig{256, 48, 8, 1},
                           TileConfig{64, 16, 4, 1}}) {
        for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV}) {
          KernelSpec s = quant(op, d, bits, KernelFamily::AttentionMma, t);
          const QuantizeKernelConfig c = quantize_kernel_config(s);
          INFO(s.key());
          CHECK(c.threads % 32 == 0);
          CHECK(c.threads >= 32);
          CHECK(c.threads <= 512);
          CHECK(c.tpr >= 1);
          CHECK(c.tpr <= 32);
          CHECK((c.tpr & (c.tpr - 1)) == 0);
          CHECK(c.threads % c.tpr == 0);
          CHECK(c.tpr * c.cpt >= c.chunks);
          if (op == QuantOp::QuantizeQ) CHECK(c.rows == t.bq);
          if (op == QuantOp::QuantizeK) CHECK(c.rows == t.bk);
          if (op == QuantOp::QuantizeQ || op == QuantOp::QuantizeK)
            CHECK(c.chunks * 8 == qk_dim_padded(d, bits));
          if (op == QuantOp::QuantizeV) {
            CHECK(c.chunks * 8 == v_dim_padded(d));
            CHECK(c.rows == quantize_v_split_tile(t.bk, d));
            CHECK(t.bk % c.rows == 0);
            CHECK(c.rows % 16 == 0);
          }
          if (op == QuantOp::ChannelStats) CHECK(c.chunks == (d + 7) / 8);
        }
      }
    }
  }
}

TEST_CASE("jit: quantize launch shapes cover the buffers and fold huge grids") {
  KernelSpec attn;
  attn.family = KernelFamily::AttentionMma;
  attn.head_dim = 128;
  QuantProblem p;
  p.batch = 4;
  p.q_heads = 32;
  p.kv_heads = 8;
  p.q_len = 1000;
  p.kv_len = 29040;
  p.head_dim = 128;
  QuantBuffers b = quant_buffers(p, attn);
  auto qspec = [&](QuantOp op) {
    KernelSpec s = attn;
    s.family = KernelFamily::Quantize;
    s.consumer = KernelFamily::AttentionMma;
    s.op = op;
    return s;
  };
  LaunchShape ls = quantize_launch_shape(qspec(QuantOp::QuantizeQ), b);
  CHECK(ls.grid[0] == 8);  // ceil(1000 / 128)
  CHECK(ls.grid[1] == 4 * 32);
  CHECK(ls.grid[2] == 1);
  CHECK(ls.block[0] == static_cast<unsigned>(quantize_kernel_config(qspec(QuantOp::QuantizeQ)).threads));
  CHECK(ls.block[1] == 1);
  CHECK(ls.dynamic_smem == 0);
  ls = quantize_launch_shape(qspec(QuantOp::QuantizeK), b);
  CHECK(ls.grid[0] == (29040 + 63) / 64);
  CHECK(ls.grid[1] == 4 * 8);
  ls = quantize_launch_shape(qspec(QuantOp::QuantizeV), b);
  CHECK(ls.grid[0] == static_cast<unsigned>(b.kv_len_pad / 64));
  ls = quantize_launch_shape(qspec(QuantOp::ChannelStats), b);
  CHECK(ls.grid[0] == 2 * b.stats_chunks);  // one CTA per statistics chunk of K and of V
  CHECK(ls.grid[1] == 4 * 8);
  // The statistics walk's ring: a whole chunk of every thread's rows on sm_90a (3 CTAs per SM)
  const QuantizeKernelConfig sc = quantize_kernel_config(qspec(QuantOp::ChannelStats));
  CHECK(sc.stats_ring == 4);
  CHECK(ls.dynamic_smem == static_cast<std::size_t>(sc.dynamic_smem));
  CHECK(sc.dynamic_smem * sc.min_ctas <= 228 * 1024);
  // On sm_89 (100 KB per SM) a ring of a whole chunk (64 KB) leaves no room for three CTAs per
  // SM: the statistics' rows go through registers.
  {
    KernelSpec ss = qspec(QuantOp::ChannelStats);
    ss.arch = Arch::Sm89;
    const QuantizeKernelConfig c89 = quantize_kernel_config(ss);
    CHECK(c89.stats_ring == 0);
    CHECK(c89.dynamic_smem * c89.min_ctas <= 100 * 1024);
  }

  // More (batch, head) pairs than gridDim.y holds: folded into z, every pair numbered.
  QuantProblem big = p;
  big.batch = 3000;
  big.q_heads = 64;
  big.kv_heads = 64;
  big.q_len = 1;
  big.kv_len = 1;
  QuantBuffers bb = quant_buffers(big, attn);
  ls = quantize_launch_shape(qspec(QuantOp::QuantizeQ), bb);
  CHECK(ls.grid[0] == 1);
  CHECK(ls.grid[1] <= 65535u);
  CHECK(ls.grid[2] <= 65535u);
  CHECK(static_cast<long long>(ls.grid[1]) * ls.grid[2] >= 3000LL * 64);
  CHECK(static_cast<long long>(ls.grid[1]) * (ls.grid[2] - 1) < 3000LL * 64);

  // A sequence longer than 2^31 tokens·dims stays in grid.x.
  QuantProblem longp = p;
  longp.batch = 1;
  longp.q_heads = longp.kv_heads = 1;
  longp.q_len = longp.kv_len = (1LL << 31) + 5;
  QuantBuffers lb = quant_buffers(longp, attn);
  ls = quantize_launch_shape(qspec(QuantOp::QuantizeK), lb);
  CHECK(ls.grid[0] == static_cast<unsigned>(lb.k_blocks));

  // A quantize spec that disagrees with the buffers is refused.
  KernelSpec wrong = qspec(QuantOp::QuantizeQ);
  wrong.qk_bits = 4;
  CHECK_THROWS_AS(quantize_launch_shape(wrong, b), Error);
  wrong = qspec(QuantOp::QuantizeK);
  wrong.head_dim = 64;
  CHECK_THROWS_AS(quantize_launch_shape(wrong, b), Error);
}

TEST_CASE("jit: make_quantize_params points at the workspace buffers and checks shapes") {
  KernelSpec attn;
  attn.family = KernelFamily::AttentionMma;
  attn.head_dim = 96;
  attn.smooth_q = false;
  attn.smooth_k = true;
  QuantProblem p;
  p.batch = 2;
  p.q_heads = 8;
  p.kv_heads = 2;
  p.q_len = 300;
  p.kv_len = 500;
  p.head_dim = 96;
  const QuantBuffers b = quant_buffers(p, attn);
  std::vector<char> ws(b.offsets().total);
  const std::uint16_t dummy[1] = {0};
  const TensorRef q = TensorRef::nhd(dummy, DType::F16, 2, 8, 300, 96);
  const TensorRef k = TensorRef::hnd(dummy, DType::F16, 2, 2, 500, 96);
  const TensorRef v = TensorRef::hnd(dummy, DType::F16, 2, 2, 500, 96);
  const auto P = make_quantize_params(b, q, k, v, ws.data());
  const auto o = b.offsets();
  CHECK(reinterpret_cast<char*>(P.q_codes) == ws.data() + o.q_codes);
  CHECK(reinterpret_cast<char*>(P.k_stats) == ws.data() + o.k_stats);
  CHECK(reinterpret_cast<char*>(P.v_codes) == ws.data() + o.v_codes);
  CHECK(reinterpret_cast<char*>(P.v_stats) == ws.data() + o.v_stats);
  // non-finite flags: appended after v_stats, each 256-byte aligned, inside the workspace
  CHECK(reinterpret_cast<char*>(P.q_bad) == ws.data() + o.q_bad);
  CHECK(reinterpret_cast<char*>(P.k_first_bad) == ws.data() + o.k_first_bad);
  CHECK(reinterpret_cast<char*>(P.v_first_bad) == ws.data() + o.v_first_bad);
  CHECK(o.q_bad >= o.v_stats + static_cast<std::size_t>(b.v_stats()) * 4);
  CHECK(o.q_bad % 256 == 0);
  CHECK(o.k_first_bad % 256 == 0);
  CHECK(o.v_first_bad % 256 == 0);
  CHECK(o.v_first_bad + static_cast<std::size_t>(b.v_first_bad()) * 4 <= o.total);
  CHECK(b.q_bad() == 2 * 8 * b.q_len_pad);
  CHECK(b.k_first_bad() == 2 * 2);
  CHECK(b.v_first_bad() == 2 * 2 * b.d_v);
  CHECK(P.q_mean == nullptr);  // no smooth-Q buffer
  CHECK(P.q_kbias != nullptr);
  CHECK(P.q_stride_seq == 8 * 96);
  CHECK(P.k_stride_seq == 96);
  CHECK(P.kv_len == 500);
  const TensorRef bad = TensorRef::hnd(dummy, DType::F16, 2, 8, 300, 64);
  CHECK_THROWS_AS(make_quantize_params(b, bad, k, v, ws.data()), Error);
  TensorRef f32 = q;
  f32.dtype = DType::F32;
  CHECK_THROWS_AS(make_quantize_params(b, f32, k, v, ws.data()), Error);
}

TEST_CASE("jit: parse_ptxas_facts reads the compiled entry's line of an NVRTC log") {
  const std::string log =
      "ptxas info    : 830 bytes gmem, 152 bytes cmem[4]\n"
      "ptxas info    : Compiling entry function 'helper_entry' for 'sm_89'\n"
      "ptxas info    : Function properties for helper_entry\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 100 bytes smem, 1 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'sage2_quantize_q' for 'sm_89'\n"
      "ptxas info    : Function properties for sage2_quantize_q\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 60 registers, used 1 barriers, 37120 bytes smem, 584 bytes cmem[0], 32 bytes "
      "cmem[2]\n"
      "ptxas info    : Compile time = 233.508 ms\n";
  const PtxasFacts f = parse_ptxas_facts(log, "sage2_quantize_q");
  CHECK(f.registers == 60);
  CHECK(f.spill_store_bytes == 0);
  CHECK(f.spill_load_bytes == 0);
  CHECK(f.stack_frame_bytes == 0);
  CHECK(f.static_shared_bytes == 37120);
  CHECK(f.constant_bytes == 616);
  const PtxasFacts first = parse_ptxas_facts(log);
  CHECK(first.registers == 255);
  CHECK(first.spill_store_bytes == 4);
  CHECK(first.spill_load_bytes == 8);
  CHECK(first.stack_frame_bytes == 8);
  const PtxasFacts none = parse_ptxas_facts("");
  CHECK(none.registers == -1);
}

TEST_CASE("jit: quantize kernels derived from an attention spec agree with its buffers") {
  // Every padded width a quantize kernel bakes in must equal the one kernels::quant_buffers gives
  // the attention kernel and the CPU reference (a stats kernel once wrote int8-wide k_stats rows
  // for int4 buffers).
  for (KernelFamily fam : {KernelFamily::AttentionMma, KernelFamily::AttentionWgmma}) {
    for (int bits : {4, 8}) {
      if (fam == KernelFamily::AttentionWgmma && bits == 4) continue;
      for (int d : {1, 40, 64, 96, 128, 160, 256, 512}) {
        KernelSpec attn;
        attn.family = fam;
        attn.head_dim = d;
        attn.qk_bits = bits;
        attn.smooth_q = bits == 4;
        if (fam == KernelFamily::AttentionWgmma) attn.tile = TileConfig{128, 128, 8, 1};
        QuantProblem p;
        p.batch = 2;
        p.q_heads = 4;
        p.kv_heads = 2;
        p.q_len = 77;
        p.kv_len = 300;
        p.head_dim = d;
        const QuantBuffers b = quant_buffers(p, attn);
        for (QuantOp op : {QuantOp::ChannelStats, QuantOp::QuantizeQ, QuantOp::QuantizeK, QuantOp::QuantizeV}) {
          const KernelSpec q = quantize_spec_for(attn, op);
          INFO(q.key());
          const std::string src = generate_source(q);
          if (op != QuantOp::QuantizeV) CHECK(define_value(src, "SAGE2_D_QK") == b.d_qk);
          if (op == QuantOp::QuantizeQ || op == QuantOp::QuantizeK) {
            CHECK(define_value(src, "SAGE2_ROW_BYTES") == b.row_bytes);
            CHECK(define_value(src, "SAGE2_Q_GROUPS") == b.layout.q_groups_per_block());
            CHECK(parse_table(src, "sage2_q_group_table") == q_group_table(b.layout));
          }
          CHECK(define_value(src, "SAGE2_D_V") == b.d_v);
          CHECK(define_value(src, "SAGE2_BK") == b.layout.bk);
          CHECK_NOTHROW(quantize_launch_shape(q, b));
        }
      }
    }
  }
}

TEST_CASE("jit: NVRTC is found by the documented search order; a missing one is reported") {
  {
    setenv("SAGE2_LIBNVRTC", "/opt/custom/libnvrtc.so.99", 1);
    const auto c = nvrtc::default_candidates();
    unsetenv("SAGE2_LIBNVRTC");
    REQUIRE(c.size() >= 4);
    CHECK(c[0].path == "/opt/custom/libnvrtc.so.99");
    CHECK(c[0].rule == "$SAGE2_LIBNVRTC");
    // candidates added before the first load (the Python binding's wheels) would come here
    const size_t sys = c.size() - 4;
    CHECK(c[sys].path == "libnvrtc.so.13");
    CHECK(c[sys + 1].path == "libnvrtc.so.12");
    CHECK(c[sys + 2].path == "libnvrtc.so");
    CHECK(c[sys].rule.find("system library name") != std::string::npos);
  }
  const auto c = nvrtc::default_candidates();
  CHECK(c.back().path.find("/libnvrtc.so") != std::string::npos);  // the build toolkit's, last
  CHECK(c.back().rule == "toolkit sage2 was built with");
  const auto miss = nvrtc::load_from({{"/nonexistent/sage2/libnvrtc.so.13", "wheel rule"}, "libsage2_no_such_nvrtc.so"});
  CHECK_FALSE(miss.ok);
  // every candidate is named with its rule, in order
  const auto at_wheel = miss.tried.find("/nonexistent/sage2/libnvrtc.so.13 (wheel rule): ");
  const auto at_name = miss.tried.find("libsage2_no_such_nvrtc.so (given): ");
  CHECK(at_wheel != std::string::npos);
  CHECK(at_name != std::string::npos);
  CHECK(at_wheel < at_name);
  const auto hit = nvrtc::load_from({"/nonexistent/sage2/libnvrtc.so.13", c.back()});
  CHECK(hit.ok);
  CHECK(hit.api.major >= 12);
  CHECK(hit.api.path == c.back().path);
  CHECK(hit.api.rule == c.back().rule);
  CHECK(hit.api.file.find("libnvrtc.so") != std::string::npos);  // the mapped file
  // a toolkit keeps libnvrtc-builtins beside libnvrtc: preloaded from there
  const std::string builtins = "libnvrtc-builtins.so." + std::to_string(hit.api.major) + "." +
                               std::to_string(hit.api.minor);
  if (std::filesystem::exists(std::filesystem::path(hit.api.file).parent_path() / builtins))
    CHECK(hit.api.builtins.find(builtins) != std::string::npos);
  CHECK(nvrtc::api().major == nvrtc_version().first);
  // once the process's search has run, nothing more can be added (and it says so)
  CHECK_FALSE(nvrtc::add_candidate("/late/libnvrtc.so.13", "too late"));
  CHECK(nvrtc::attempt().ok);
  CHECK_FALSE(nvrtc::attempt().api.rule.empty());
}
