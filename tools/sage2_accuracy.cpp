// sage2-accuracy: the accuracy study of SageAttention2's techniques on the CPU emulation.
//
//   sage2-accuracy [options]
//     --seed N            input seed (default 1)
//     --batch B           (default 1)
//     --heads H           query heads (default 4)
//     --kv-heads H        kv heads (default = heads; must divide heads)
//     --q-len N           (default 1024)
//     --kv-len N          (default = q-len)
//     --head-dim D        (default 128)
//     --dtype f16|bf16    input dtype (default f16)
//     --inputs activation|gaussian|student-t   activation-like (channel bias + outliers, default),
//                         N(0,1), or heavy-tailed Student-t with 3 degrees of freedom
//     --causal none|top-left|bottom-right   (default none)
//     --qk-bias X --outlier-channels N --outlier-factor X --qk-noise X --latent-scale X
//     --v-bias X --v-outlier-bias X --v-latent-scale X --v-noise X   knobs of the activation-like input model
//                         (reference::ActivationModel; defaults there)
//     --only SECTION      smoothing | granularity | pv | accumulator | hopper | onepass | rowsum | sanity
//     --threads T         worker threads (default: all cores)
//     --sample-tiles S --sample-unit U --v-headroom H   the onepass section's sampled rows (defaults
//                                       4, 64 keys (0: the KV tile), 16)
//     --json FILE         also write the results as JSON ("-" for stdout, then no text)
//     --help
//
// Every configuration is run by reference::emulate_attention and compared with
// reference::exact_attention (double) using the paper's metrics (appendix A.7): cosine similarity,
// relative L1 and RMSE on the flattened output of all heads; "worst" is the lowest per-head
// cosine similarity. Sections mirror the paper's Tables 4, 6, 7, 10 and the 8-bit Hopper kernel;
// "onepass" compares today's statistics with the one-pass ones (kv_tile_statistics: k̄, μ from the
// first KV tile, V scaled per tile; DESIGN.md's amendment) and with the sampled ones
// (sample_statistics: k̄, μ and V's scale from S spread KV tiles, headroom H; issue 39) for each attention family, with the
// ratio of rel-L1s ("x today") that the amendment's bar (at most 1.02) is about.
// Exit codes: 0 ok, 1 failure, 2 usage error.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "reference/kernel_config.hpp"
#include "sage2/reference.hpp"

using namespace sage2;
namespace ref = sage2::reference;

namespace {

const char* kUsage =
    "usage: sage2-accuracy [--seed N] [--batch B] [--heads H] [--kv-heads H] [--q-len N]\n"
    "                      [--kv-len N] [--head-dim D] [--dtype f16|bf16]\n"
    "                      [--inputs activation|gaussian|student-t] [--causal none|top-left|bottom-right]\n"
    "                      [--only smoothing|granularity|pv|accumulator|hopper|onepass|rowsum|sanity]\n"
    "                      [--qk-bias X] [--outlier-channels N] [--outlier-factor X] [--qk-noise X]\n"
    "                      [--latent-scale X] [--v-bias X] [--v-outlier-bias X]\n"
    "                      [--v-latent-scale X] [--v-noise X]\n"
    "                      [--threads T] [--sample-tiles S] [--sample-unit U] [--v-headroom H] [--json FILE|-]\n";

enum class InputKind { Activation, Gaussian, StudentT };

const char* input_kind_name(InputKind k) {
  return k == InputKind::Gaussian ? "gaussian" : k == InputKind::StudentT ? "student-t" : "activation";
}

struct Args {
  std::uint64_t seed = 1;
  std::int64_t batch = 1, heads = 4, kv_heads = -1, q_len = 1024, kv_len = -1;
  int head_dim = 128;
  DType dtype = DType::F16;
  InputKind inputs = InputKind::Activation;
  CausalMode causal = CausalMode::None;
  std::string only;
  int threads = 0;
  int sample_tiles = 4;       // the onepass section's "sampled" rows (QuantizeOptions::sample_tiles)
  double v_headroom = 16.0;   // ... and their QuantizeOptions::v_headroom
  int sample_unit = 64;       // ... and their QuantizeOptions::sample_unit (0: the KV tile)
  std::string json;
  ref::ActivationModel model;
};

struct UsageError {
  std::string msg;
};

std::int64_t parse_int(const std::string& opt, const std::string& v, std::int64_t lo, std::int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
    throw UsageError{opt + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'"};
  return x;
}

double parse_real(const std::string& opt, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= lo && x <= hi))
    throw UsageError{opt + " expects a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'"};
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "--help" || opt == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) throw UsageError{"missing value after " + opt};
    const std::string v = argv[++i];
    if (opt == "--seed") a.seed = static_cast<std::uint64_t>(parse_int(opt, v, 0, INT64_MAX));
    else if (opt == "--batch") a.batch = parse_int(opt, v, 1, 64);
    else if (opt == "--heads") a.heads = parse_int(opt, v, 1, 256);
    else if (opt == "--kv-heads") a.kv_heads = parse_int(opt, v, 1, 256);
    else if (opt == "--q-len") a.q_len = parse_int(opt, v, 1, 1 << 20);
    else if (opt == "--kv-len") a.kv_len = parse_int(opt, v, 1, 1 << 20);
    else if (opt == "--head-dim") a.head_dim = static_cast<int>(parse_int(opt, v, 1, 512));
    else if (opt == "--threads") a.threads = static_cast<int>(parse_int(opt, v, 0, 1024));
    else if (opt == "--sample-tiles") a.sample_tiles = static_cast<int>(parse_int(opt, v, 1, 1 << 20));
    else if (opt == "--v-headroom") a.v_headroom = parse_real(opt, v, 1, 1 << 20);
    else if (opt == "--sample-unit") a.sample_unit = static_cast<int>(parse_int(opt, v, 0, 1 << 20));
    else if (opt == "--json") a.json = v;
    else if (opt == "--qk-bias") a.model.qk_bias = parse_real(opt, v, 0, 1e4);
    else if (opt == "--outlier-channels") a.model.outlier_channels = static_cast<int>(parse_int(opt, v, 0, 512));
    else if (opt == "--outlier-factor") a.model.outlier_factor = parse_real(opt, v, 0, 1e4);
    else if (opt == "--qk-noise") a.model.qk_noise = parse_real(opt, v, 0, 1e4);
    else if (opt == "--latent-scale") a.model.latent_scale = parse_real(opt, v, 0, 1e4);
    else if (opt == "--v-bias") a.model.v_bias = parse_real(opt, v, 0, 1e4);
    else if (opt == "--v-outlier-bias") a.model.v_outlier_bias = parse_real(opt, v, 0, 1e4);
    else if (opt == "--v-latent-scale") a.model.v_latent_scale = parse_real(opt, v, 0, 1e4);
    else if (opt == "--v-noise") a.model.v_noise = parse_real(opt, v, 0, 1e4);
    else if (opt == "--dtype") {
      if (v == "f16") a.dtype = DType::F16;
      else if (v == "bf16") a.dtype = DType::BF16;
      else throw UsageError{"--dtype expects f16 or bf16, got '" + v + "'"};
    } else if (opt == "--inputs") {
      if (v == "activation") a.inputs = InputKind::Activation;
      else if (v == "gaussian") a.inputs = InputKind::Gaussian;
      else if (v == "student-t") a.inputs = InputKind::StudentT;
      else throw UsageError{"--inputs expects activation, gaussian or student-t, got '" + v + "'"};
    } else if (opt == "--causal") {
      if (v == "none") a.causal = CausalMode::None;
      else if (v == "top-left") a.causal = CausalMode::TopLeft;
      else if (v == "bottom-right") a.causal = CausalMode::BottomRight;
      else throw UsageError{"--causal expects none, top-left or bottom-right, got '" + v + "'"};
    } else if (opt == "--only") {
      if (v != "smoothing" && v != "granularity" && v != "pv" && v != "accumulator" && v != "hopper" && v != "onepass" &&
          v != "rowsum" &&
          v != "sanity")
        throw UsageError{"--only expects smoothing, granularity, pv, accumulator, hopper, onepass, rowsum or sanity, got '" + v + "'"};
      a.only = v;
    } else {
      throw UsageError{"unknown option " + opt};
    }
  }
  if (a.kv_heads < 0) a.kv_heads = a.heads;
  if (a.kv_len < 0) a.kv_len = a.q_len;
  if (a.heads % a.kv_heads != 0)
    throw UsageError{"--heads " + std::to_string(a.heads) + " is not a multiple of --kv-heads " + std::to_string(a.kv_heads)};
  return a;
}

struct Paper {   // the paper's numbers for the row, when it has one (CogVideoX, averaged)
  double cos = NAN, l1 = NAN, rmse = NAN;
};

struct Config {
  std::string section, name;
  ref::KernelConfig spec;
  ref::EmulationOptions opt;
  Paper paper;
  std::string baseline;   // a config of the same run this row's rel-L1 is divided by (onepass)
};

ref::KernelConfig int4_spec(int d, CausalMode causal) {
  ref::KernelConfig s;   // SageAttn2-4b: mma.sync m16n8k64 INT4, bq 128, bk 64, 4 warps (sm_89)
  s.family = AttentionFamily::Mma;
  s.arch = "sm_89";
  s.qk_bits = 4;
  s.head_dim = d;
  s.causal = causal;
  s.tile = {128, 64, 4, 1};
  s.smooth_q = true;
  s.smooth_k = true;
  s.smooth_v = false;
  s.two_level_accum = true;
  s.pv_accum = PvAccum::Fp32;  // the paper's kernels (FP22 in fp32 registers); Auto on sm_89 is fp16
  return s;
}

ref::KernelConfig hopper_spec(int d, CausalMode causal) {
  ref::KernelConfig s;   // SageAttn2-8b on Hopper: wgmma INT8, bq 128 over 2 warpgroups, bk 128
  s.family = AttentionFamily::Wgmma;
  s.arch = "sm_90a";
  s.qk_bits = 8;
  s.head_dim = d;
  s.causal = causal;
  s.tile = {128, 128, 8, 2};
  s.smooth_q = false;   // the 8-bit kernel uses every technique except smoothing Q
  s.smooth_k = true;
  s.smooth_v = false;
  s.two_level_accum = true;
  return s;
}

std::vector<Config> configs(const Args& a) {
  std::vector<Config> cs;
  const int d = a.head_dim;
  // The 4-bit kernel as it runs on Ada: INT4 per-thread, smooth Q+K, FP8 E4M3 P̃/V, FP22 (13-bit)
  // accumulator with two-level accumulation.
  ref::EmulationOptions ada;
  ada.accum_mantissa_bits = 13;
  ada.threads = a.threads;

  {  // Table 4: smoothing
    const char* names[] = {"None", "Smooth K", "Smooth Q", "Smooth Q+K"};
    const Paper paper[] = {{0.8004, 0.3906, 0.2223}, {0.9807, 0.1493, 0.0743}, {0.9830, 0.1250, 0.0712}, {0.9946, 0.0648, 0.0334}};
    for (int i = 0; i < 4; ++i) {
      Config c{"smoothing", names[i], int4_spec(d, a.causal), ada, paper[i]};
      c.spec.smooth_k = (i == 1 || i == 3);
      c.spec.smooth_q = (i == 2 || i == 3);
      cs.push_back(c);
    }
  }
  {  // Table 6: granularity (INT4, smooth Q+K)
    const ref::Granularity g[] = {ref::Granularity::PerToken, ref::Granularity::PerThread, ref::Granularity::PerBlock,
                                  ref::Granularity::PerTensor};
    const Paper paper[] = {{0.9945, 0.0649, 0.0335}, {0.9945, 0.0622, 0.0313}, {0.9803, 0.1492, 0.0744}, {0.9715, 0.1800, 0.0865}};
    for (int i = 0; i < 4; ++i) {
      Config c{"granularity", ref::granularity_name(g[i]), int4_spec(d, a.causal), ada, paper[i]};
      c.opt.granularity = g[i];
      cs.push_back(c);
    }
  }
  {  // Table 7: P̃,V format (INT4 smoothed Q,K; "the accumulator is always 32-bit")
    const ref::PvFormat f[] = {ref::PvFormat::Int8, ref::PvFormat::E5M2, ref::PvFormat::E4M3, ref::PvFormat::FP16};
    const char* names[] = {"INT8", "E5M2", "E4M3", "FP16"};
    const Paper paper[] = {{0.7705, 0.5618, 0.5044}, {0.9920, 0.0905, 0.0903}, {0.9944, 0.0683, 0.0347}, {0.9945, 0.0649, 0.0335}};
    for (int i = 0; i < 4; ++i) {
      Config c{"pv", names[i], int4_spec(d, a.causal), ada, paper[i]};
      c.opt.accum_mantissa_bits = 23;
      c.opt.pv_format = f[i];
      cs.push_back(c);
    }
  }
  {  // Table 10 / Sec. 3.4: accumulator width × two-level × smooth V
    for (int bits : {23, 13})
      for (int two : {0, 1})
        for (int sv : {0, 1}) {
          std::string name = std::string(bits == 23 ? "fp32 acc" : "fp22 acc") + (two ? ", two-level" : ", one-level") +
                             (sv ? ", smooth V" : "");
          Config c{"accumulator", name, int4_spec(d, a.causal), ada, {}};
          c.opt.accum_mantissa_bits = bits;
          c.spec.two_level_accum = two != 0;
          c.spec.smooth_v = sv != 0;
          if (bits == 13 && two == 1) c.paper = sv ? Paper{0.9975, 0.0406, 0.0773} : Paper{0.9825, 0.1980, 0.2387};
          cs.push_back(c);
        }
  }
  {  // The 8-bit configuration used on Hopper
    for (int bits : {23, 13})
      for (int sv : {0, 1}) {
        std::string name = std::string("wgmma int8, smooth K") + (sv ? "+V" : "") + (bits == 23 ? ", fp32 acc" : ", fp22 acc") +
                           ", two-level";
        Config c{"hopper", name, hopper_spec(d, a.causal), ada, {}};
        c.opt.accum_mantissa_bits = bits;
        c.spec.smooth_v = sv != 0;
        cs.push_back(c);
      }
    Config q{"hopper", "wgmma int8, smooth Q+K, fp32 acc, two-level", hopper_spec(d, a.causal), ada, {}};
    q.spec.smooth_q = true;   // optional for 8-bit (DESIGN.md); shown for strongly biased Q
    q.opt.accum_mantissa_bits = 23;
    cs.push_back(q);
    Config c{"hopper", "wgmma int8, smooth K, fp22 acc, one-level", hopper_spec(d, a.causal), ada, {}};
    c.spec.two_level_accum = false;
    cs.push_back(c);
    Config m{"hopper", "mma.sync int8 (m16n8k32), smooth K, fp32 acc", int4_spec(d, a.causal), ada, {}};
    m.spec.qk_bits = 8;
    m.spec.arch = "sm_90a";
    m.spec.smooth_q = false;
    m.opt.accum_mantissa_bits = 23;
    cs.push_back(m);
  }
  {  // One pass over K and V (DESIGN.md's amendment): each family's configuration with today's
     // statistics, then with the first tile's means and per-tile V scales; the hardware's 13-bit
     // accumulator (Ada's FP22, the wgmma e4m3 probe).
    ref::EmulationOptions hw = ada;
    hw.accum_mantissa_bits = 13;
    ref::KernelConfig mma8 = int4_spec(d, a.causal);   // mma.sync m16n8k32 INT8, bk 64
    mma8.qk_bits = 8;
    mma8.smooth_q = false;
    ref::KernelConfig mma8v = mma8, wg = hopper_spec(d, a.causal), wgv = wg;
    mma8v.smooth_v = wgv.smooth_v = true;
    const std::pair<const char*, ref::KernelConfig> families[] = {{"mma int8 m16n8k32, smooth K", mma8},
                                                                  {"mma int8 m16n8k32, smooth K+V", mma8v},
                                                                  {"mma int4 m16n8k64, smooth Q+K", int4_spec(d, a.causal)},
                                                                  {"wgmma int8, smooth K", wg},
                                                                  {"wgmma int8, smooth K+V", wgv}};
    for (const auto& [name, spec] : families) {
      Config today{"onepass", std::string(name) + ", today", spec, hw, {}};
      Config one{"onepass", std::string(name) + ", one-pass", spec, hw, {}, today.name};
      one.opt.kv_tile_statistics = true;
      Config sample{"onepass", std::string(name) + ", sampled", spec, hw, {}, today.name};
      sample.opt.sample_statistics = true;
      sample.opt.sample_tiles = a.sample_tiles;
      sample.opt.sample_unit = a.sample_unit;
      sample.opt.v_headroom = static_cast<float>(a.v_headroom);
      cs.push_back(today);
      cs.push_back(one);
      cs.push_back(sample);
    }
  }
  {  // The row sum of P̂ instead of P̃ (EmulationOptions::row_sum; issues 31, 41): each family's
     // configuration with the contract's fp32 row sum, then with the sum of the P̂ the product reads.
    ref::EmulationOptions hw = ada;
    hw.accum_mantissa_bits = 13;
    ref::KernelConfig mma8 = int4_spec(d, a.causal), mma16, wg = hopper_spec(d, a.causal);
    mma8.qk_bits = 8;
    mma8.smooth_q = false;
    mma16 = mma8;
    mma16.arch = "sm_80";   // FP16 P̃V, the Ampere path
    ref::EmulationOptions hw16 = hw;
    hw16.accum_mantissa_bits = 23;
    const std::tuple<const char*, ref::KernelConfig, ref::EmulationOptions> families[] = {
        {"mma int8, FP16 P~V (sm_80)", mma16, hw16}, {"mma int8, FP8 P~V (sm_89)", mma8, hw}, {"wgmma int8, FP8 P~V", wg, hw}};
    for (const auto& [name, spec, o] : families) {
      Config today{"rowsum", std::string(name) + ", sum of P~", spec, o, {}};
      today.opt.row_sum = ref::RowSumForm::OfPTilde;
      Config hat{"rowsum", std::string(name) + ", sum of P^", spec, o, {}, today.name};
      hat.opt.row_sum = ref::RowSumForm::OfPHat;
      cs.push_back(today);
      cs.push_back(hat);
    }
  }
  {  // sanity: the emulation with every approximation switched off, and one at a time
    Config c{"sanity", "exact QK, f32 P/V, fp32 acc", int4_spec(d, a.causal), ada, {}};
    c.opt.exact_qk = true;
    c.opt.pv_format = ref::PvFormat::F32;
    c.opt.accum_mantissa_bits = 23;
    cs.push_back(c);
    Config c8 = c;
    c8.name = "int8 QK only";
    c8.opt.exact_qk = false;
    c8.spec.qk_bits = 8;
    cs.push_back(c8);
    Config c4 = c;
    c4.name = "int4 QK only";
    c4.opt.exact_qk = false;
    cs.push_back(c4);
    Config e = c;
    e.name = "e4m3 P/V only";
    e.opt.pv_format = ref::PvFormat::E4M3;
    cs.push_back(e);
    Config f = c;
    f.name = "fp22 acc only (one-level)";
    f.opt.accum_mantissa_bits = 13;
    f.spec.two_level_accum = false;
    cs.push_back(f);
  }
  std::vector<Config> out;
  for (auto& c : cs)
    if (a.only.empty() || a.only == c.section) out.push_back(c);
  return out;
}

struct AttnStats {
  std::int64_t rows = 0;
  double eff_keys = 0, max_p = 0, logit_std = 0, q_absmax = 0, k_absmax = 0, v_absmax = 0;
};

// Describes the synthetic attention (how peaked it is), on up to 32 rows per head, in double.
AttnStats attention_stats(const ref::AttentionInputs& in, const Args& a) {
  AttnStats st;
  const TensorRef q = in.q.ref(), k = in.k.ref(), v = in.v.ref();
  const double sm = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  for (std::int64_t b = 0; b < a.batch; ++b)
    for (std::int64_t h = 0; h < a.heads; ++h) {
      const std::int64_t hk = h / (a.heads / a.kv_heads);
      const std::int64_t step = std::max<std::int64_t>(1, a.q_len / 32);
      for (std::int64_t i = 0; i < a.q_len; i += step) {
        std::vector<double> s;
        for (std::int64_t j = 0; j < a.kv_len; ++j) {
          if (!ref::key_visible(a.causal, i, j, a.q_len, a.kv_len)) continue;
          double dot = 0;
          for (int c = 0; c < a.head_dim; ++c) dot += double(ref::load(q, b, h, i, c)) * ref::load(k, b, hk, j, c);
          s.push_back(dot * sm);
        }
        if (s.empty()) continue;
        double m = -1e300, mean = 0;
        for (double x : s) {
          m = std::max(m, x);
          mean += x;
        }
        mean /= static_cast<double>(s.size());
        double l = 0, var = 0;
        for (double x : s) {
          l += std::exp(x - m);
          var += (x - mean) * (x - mean);
        }
        double p2 = 0;
        for (double x : s) p2 += std::exp(2 * (x - m)) / (l * l);
        st.eff_keys += 1.0 / p2;
        st.max_p += 1.0 / l;
        st.logit_std += std::sqrt(var / static_cast<double>(s.size()));
        ++st.rows;
      }
    }
  if (st.rows) {
    st.eff_keys /= static_cast<double>(st.rows);
    st.max_p /= static_cast<double>(st.rows);
    st.logit_std /= static_cast<double>(st.rows);
  }
  auto absmax = [](const ref::HostTensor& t) {
    double m = 0;
    for (std::int64_t b = 0; b < t.batch(); ++b)
      for (std::int64_t h = 0; h < t.heads(); ++h)
        for (std::int64_t n = 0; n < t.seq(); ++n)
          for (std::int64_t c = 0; c < t.dim(); ++c) m = std::max(m, std::fabs(double(t.get(b, h, n, c))));
    return m;
  };
  st.q_absmax = absmax(in.q);
  st.k_absmax = absmax(in.k);
  st.v_absmax = absmax(in.v);
  return st;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

// The report's header: the inputs and the exact attention's statistics, into `j` (and on stdout
// as comment lines when `text`).
void describe_run(const Args& a, const AttnStats& st, const std::string& command, bool text, nlohmann::json& j) {
  j["inputs"] = {{"seed", a.seed},
                 {"batch", a.batch},
                 {"heads", a.heads},
                 {"kv_heads", a.kv_heads},
                 {"q_len", a.q_len},
                 {"kv_len", a.kv_len},
                 {"head_dim", a.head_dim},
                 {"dtype", dtype_name(a.dtype)},
                 {"inputs", input_kind_name(a.inputs)},
                 {"causal", causal_mode_name(a.causal)}};
  if (a.inputs == InputKind::Activation)
    j["inputs"]["model"] = {{"qk_bias", a.model.qk_bias},           {"outlier_channels", a.model.outlier_channels},
                            {"outlier_factor", a.model.outlier_factor}, {"qk_noise", a.model.qk_noise},
                            {"latent_rank", a.model.latent_rank},     {"latent_scale", a.model.latent_scale},
                            {"v_bias", a.model.v_bias},               {"v_outlier_channels", a.model.v_outlier_channels},
                            {"v_outlier_bias", a.model.v_outlier_bias}, {"v_latent_scale", a.model.v_latent_scale},
                            {"v_noise", a.model.v_noise}};
  j["attention_stats"] = {{"rows_sampled", st.rows},
                          {"mean_effective_keys", st.eff_keys},
                          {"mean_max_prob", st.max_p},
                          {"mean_logit_std", st.logit_std},
                          {"q_abs_max", st.q_absmax},
                          {"k_abs_max", st.k_absmax},
                          {"v_abs_max", st.v_absmax}};
  j["metrics"] = "vs exact attention in double, on the flattened output of all heads (paper A.7); "
                 "worst_head_cos = lowest per-head cosine similarity; lse_max_abs = max |LSE - exact LSE|";
  j["results"] = nlohmann::json::array();
  if (text) {
    std::cout << "# " << command << "\n";
    std::cout << "# inputs: "
              << (a.inputs == InputKind::Gaussian   ? "N(0,1)"
                  : a.inputs == InputKind::StudentT ? "Student-t, 3 degrees of freedom (heavy-tailed)"
                                                    : "activation-like (channel bias + outlier channels, V channel bias)")
              << ", " << dtype_name(a.dtype) << ", B=" << a.batch << " Hq=" << a.heads << " Hkv=" << a.kv_heads
              << " Nq=" << a.q_len << " Nk=" << a.kv_len << " d=" << a.head_dim << " causal=" << causal_mode_name(a.causal)
              << " seed=" << a.seed << "\n";
    std::cout << "# attention (exact, " << st.rows << " sampled rows): mean effective keys 1/sum(p^2) = "
              << fmt("%.1f", st.eff_keys) << ", mean max p = " << fmt("%.4f", st.max_p)
              << ", mean std of logits = " << fmt("%.2f", st.logit_std) << "; max |Q| = " << fmt("%.2f", st.q_absmax)
              << ", max |K| = " << fmt("%.2f", st.k_absmax) << ", max |V| = " << fmt("%.2f", st.v_absmax) << "\n";
    std::cout << "# metrics vs exact attention (double); paper = CogVideoX averages from the paper's tables\n";
  }
}

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "sage2-accuracy: " << e.msg << "\n" << kUsage;
    return 2;
  }
  std::string command = "sage2-accuracy";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  const bool text = a.json != "-";
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const ref::AttentionInputs in =
        a.inputs == InputKind::Gaussian
            ? ref::make_gaussian(a.seed, a.dtype, a.batch, a.heads, a.kv_heads, a.q_len, a.kv_len, a.head_dim)
        : a.inputs == InputKind::StudentT
            ? ref::make_student_t(a.seed, a.dtype, a.batch, a.heads, a.kv_heads, a.q_len, a.kv_len, a.head_dim)
            : ref::make_activation_like(a.seed, a.dtype, a.batch, a.heads, a.kv_heads, a.q_len, a.kv_len, a.head_dim,
                                        a.model);
    ref::AttentionOptions eo;
    eo.causal = a.causal;
    eo.threads = a.threads;
    const ref::ExactResult exact = ref::exact_attention(in.q.ref(), in.k.ref(), in.v.ref(), eo);

    const AttnStats st = attention_stats(in, a);

    nlohmann::json j;
    j["command"] = command;
    describe_run(a, st, command, text, j);
    std::string section;
    std::map<std::string, ref::Metrics> done;   // by config name: the baselines of later rows
    for (const Config& c : configs(a)) {
      const ref::EmulationResult r = ref::emulate_attention(in.q.ref(), in.k.ref(), in.v.ref(), c.spec, c.opt);
      const ref::Metrics m = ref::compare(exact.o, r.o);
      double worst = 1.0;
      const std::size_t per_head = static_cast<std::size_t>(a.q_len * a.head_dim);
      for (std::int64_t bh = 0; bh < a.batch * a.heads; ++bh)
        worst = std::min(worst, ref::compare(exact.o.data() + bh * per_head, r.o.data() + bh * per_head, per_head).cos_sim);
      double lse_err = 0;
      for (std::size_t i = 0; i < exact.lse.size(); ++i)
        if (std::isfinite(exact.lse[i])) lse_err = std::max(lse_err, std::fabs(exact.lse[i] - r.lse[i]));
      nlohmann::json row = {{"section", c.section},
                            {"name", c.name},
                            {"kernel_key", ref::kernel_spec(c.spec).key()},
                            {"granularity", ref::granularity_name(c.opt.granularity)},
                            {"pv_format", ref::pv_format_name(c.opt.pv_format)},
                            {"accum_mantissa_bits", c.opt.accum_mantissa_bits},
                            {"exact_qk", c.opt.exact_qk},
                            {"kv_tile_statistics", c.opt.kv_tile_statistics},
                            {"sample_statistics", c.opt.sample_statistics},
                            {"cos_sim", m.cos_sim},
                            {"rel_l1", m.rel_l1},
                            {"rmse", m.rmse},
                            {"max_abs", m.max_abs},
                            {"worst_head_cos", worst},
                            {"lse_max_abs", lse_err}};
      if (!std::isnan(c.paper.cos))
        row["paper"] = {{"cos_sim", c.paper.cos}, {"rel_l1", c.paper.l1}, {"rmse", c.paper.rmse}};
      double vs_baseline = NAN;
      if (const auto it = done.find(c.baseline); it != done.end()) {
        vs_baseline = m.rel_l1 / it->second.rel_l1;
        row["baseline"] = c.baseline;
        row["rel_l1_vs_baseline"] = vs_baseline;
      }
      done[c.name] = m;
      j["results"].push_back(row);
      if (text) {
        if (c.section != section) {
          section = c.section;
          std::cout << "\n## " << section << "\n";
          if (section == "onepass" || section == "rowsum")
            std::printf("%-46s %10s %10s %10s %10s %10s | %8s\n", "config", "CosSim", "RelL1", "RMSE", "worst cos",
                        "LSE err", "L1 x today");
          else
            std::printf("%-46s %10s %10s %10s %10s %10s | %8s %7s %7s\n", "config", "CosSim", "RelL1", "RMSE",
                        "worst cos", "LSE err", "paper cos", "L1", "RMSE");
        }
        std::printf("%-46s %9.5f%% %10.5f %10.5f %9.4f%% %10.2e |", c.name.c_str(), 100 * m.cos_sim, m.rel_l1, m.rmse,
                    100 * worst, lse_err);
        if (!std::isnan(vs_baseline))
          std::printf(" %10.4f\n", vs_baseline);
        else if (c.section == "onepass" || c.section == "rowsum")
          std::printf(" %10s\n", "-");
        else if (!std::isnan(c.paper.cos))
          std::printf(" %7.2f%% %7.4f %7.4f\n", 100 * c.paper.cos, c.paper.l1, c.paper.rmse);
        else
          std::printf(" %8s %7s %7s\n", "-", "-", "-");
        std::fflush(stdout);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    j["seconds"] = secs;
    if (text) std::cout << "\n# " << fmt("%.1f", secs) << " s\n";
    if (!a.json.empty()) {
      if (a.json == "-") {
        std::cout << j.dump(2) << "\n";
      } else {
        std::ofstream f(a.json);
        f << j.dump(2) << "\n";
        if (!f) {
          std::cerr << "sage2-accuracy: cannot write " << a.json << "\n";
          return 1;
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "sage2-accuracy: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
