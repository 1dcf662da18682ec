#include "plan/warmup.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

#include "plan/attention_spec.hpp"
#include "plan/attention_validate.hpp"
#include "plan/planner.hpp"

namespace sage2::plan {
namespace {

// Device addresses no call ever has: validation checks alignment and overlaps only.
const void* fake_address(int slot) { return reinterpret_cast<const void*>(std::uintptr_t(slot) << 40); }

// One representative call's sizes.
struct Shape {
  std::int64_t batch = 1, q_len = 4096, kv_len = 4096;
};

// The representative calls of one option combination (see the header): the quantized path at a
// long length, and the direct path's tiles (16 / 32 / 64 / 128 rows per CTA) with and without
// merged splits. The rule decides which path each takes, as for any call.
std::vector<Shape> shapes(bool varlen) {
  if (varlen) return {Shape{2, 4096, 4096}, Shape{2, 1, 64}};
  std::vector<Shape> v{Shape{1, 4096, 4096}};
  for (std::int64_t q : {1, 17, 33, 65})
    for (std::int64_t kv : {64, 65536}) v.push_back(Shape{1, q, kv});
  return v;
}

template <class T, class F>
std::string list(const std::vector<T>& v, F name) {
  std::string s;
  for (const auto& x : v) s += std::string(s.empty() ? "" : ",") + name(x);
  return s;
}

const char* bits_name(QkBits b) { return b == QkBits::Auto ? "auto" : b == QkBits::Int4 ? "4" : "8"; }
const char* toggle_name(Toggle t) { return t == Toggle::Auto ? "auto" : t == Toggle::On ? "on" : "off"; }
const char* bool_name(bool b) { return b ? "yes" : "no"; }
const char* causal_name(CausalMode c) {
  return c == CausalMode::None ? "none" : c == CausalMode::TopLeft ? "top-left" : "bottom-right";
}
const char* dtype_str(DType d) { return dtype_name(d); }

}  // namespace

std::string WarmupSelection::describe() const {
  std::string hd;
  for (int d : head_dims) hd += (hd.empty() ? "" : ",") + std::to_string(d);
  return "head dims " + hd + "; dtypes " + list(dtypes, dtype_str) + "; causal " + list(causal, causal_name) +
         "; qk bits " + list(qk_bits, bits_name) + "; P~V " + list(pv, pv_precision_name) + " (accumulation " +
         list(pv_accum, pv_accum_name) + "); smooth q " + list(smooth_q, toggle_name) + ", smooth v " +
         list(smooth_v, bool_name) + "; LSE " + list(lse, bool_name) + "; masks " + list(masks, mask_type_name) +
         "; varlen " + (varlen ? "yes" : "no") + "; small-q path " + list(small_q, small_q_path_name) +
         "; family " + list(families, [](const std::optional<kernels::KernelFamily>& f) {
           return f ? kernels::family_name(*f) : "auto";
         }) +
         "; any batch, heads, GQA group and sequence lengths";
}

WarmupSet warmup_kernel_specs(const WarmupSelection& sel, const CallSettings& settings) {
  WarmupSet out;
  std::map<std::string, kernels::KernelSpec> specs;
  auto add = [&](const std::vector<kernels::KernelSpec>& v) {
    for (kernels::KernelSpec k : v) {
      k.arch = settings.arch;
      k.ptx = settings.ptx;
      specs.emplace(k.key(), k);
    }
  };
  auto left_out = [&](const std::string& why) {
    if (std::find(out.left_out.begin(), out.left_out.end(), why) == out.left_out.end()) out.left_out.push_back(why);
  };
  const std::vector<bool> layouts = sel.varlen ? std::vector<bool>{false, true} : std::vector<bool>{false};
  for (const auto& family : sel.families) {
  CallSettings s = settings;
  if (family) s.family = family;
  for (int hd : sel.head_dims)
    for (DType dt : sel.dtypes)
      for (CausalMode c : sel.causal)
        for (QkBits bits : sel.qk_bits)
          for (PvPrecision pv : sel.pv)
            for (PvAccum acc : sel.pv_accum)
              for (Toggle sq : sel.smooth_q)
                for (bool sv : sel.smooth_v)
                  for (bool lse : sel.lse)
                    for (MaskType mask : sel.masks)
                      for (SmallQPath small : sel.small_q)
                        for (bool varlen : layouts) {
                          if (varlen && (mask != MaskType::None || sq == Toggle::On || small == SmallQPath::Direct))
                            continue;  // calls validation refuses: no such call exists
                          AttentionParams params;
                          params.causal = c;
                          params.qk_bits = bits;
                          params.pv_precision = pv;
                          params.pv_accum = acc;
                          params.smooth_q = sq;
                          params.smooth_k = sel.smooth_k;
                          params.smooth_v = sv;
                          params.lse = lse ? static_cast<float*>(const_cast<void*>(fake_address(6))) : nullptr;
                          params.small_q_path = small;
                          bool ran = false;
                          for (const Shape& sh : shapes(varlen)) {
                            const TensorRef q = TensorRef::hnd(fake_address(1), dt, sh.batch, 1, sh.q_len, hd);
                            const TensorRef k = TensorRef::hnd(fake_address(2), dt, sh.batch, 1, sh.kv_len, hd);
                            const TensorRef v = TensorRef::hnd(fake_address(3), dt, sh.batch, 1, sh.kv_len, hd);
                            const TensorRef o = TensorRef::hnd(fake_address(4), dt, sh.batch, 1, sh.q_len, hd);
                            params.mask = MaskRef{};
                            if (mask != MaskType::None) {
                              params.mask.data = fake_address(5);
                              params.mask.type = mask;
                              params.mask.stride_q = sh.kv_len;
                              params.mask.stride_k = 1;
                            }
                            try {
                              AttentionProblem p;
                              if (varlen) {
                                SeqLens lens;
                                lens.batch = sh.batch;
                                lens.kv_lens = static_cast<const std::int32_t*>(fake_address(7));
                                p = validate_attention_varlen(q, k, v, o, lens, params, s.arch);
                              } else {
                                p = validate_attention(q, k, v, o, params, s.arch);
                              }
                              add(call_kernel_specs(p, s));
                              // channel_stats in both forms: the call's head count picks one
                              if (!p.direct)
                                add(quantized_call_kernels(planned_attention_spec(p, s), s.quant_path).with_alternatives());
                              if (!p.direct && s.planner) {
                                // Every tile the tuning database can give this specialisation at some size.
                                for (const kernels::TileConfig& t :
                                     s.planner->tuned_tiles(attention_spec_for(p, s.arch, s.family), p))
                                  add(quantized_call_kernels(attention_call_spec(p, s, t), s.quant_path).with_alternatives());
                              }
                              ran = true;
                            } catch (const Error& e) {
                              // A combination no call can make here (the lists are a product).
                              if (e.code() != ErrorCode::Unsupported && e.code() != ErrorCode::InvalidArgument)
                                throw;
                              left_out(e.what());
                            }
                          }
                          out.combinations += ran ? 1 : 0;
                        }
  }
  for (auto& [key, spec] : specs) out.specs.push_back(spec);
  return out;
}

}  // namespace sage2::plan
