#include "model/cpu_matmul.h"

#include <ATen/Context.h>

#include <fstream>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "era/error.h"
#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_attention.h"
#include "kernels/int8_linear.h"
#include "kernels/onednn_linear.h"
#include "model/bundle.h"
#include "model/native_decoder.h"
#include "model/native_vision.h"
#include "util/compat.h"

namespace era {

namespace {

// From this many rows a GEMM is compute-bound enough that widening the weight per call (read 2
// bytes, write 4 per element) costs less than the slow reduced-precision kernel saves: on the
// docs/perf/'s machine a 4096x4096 bf16 linear at 8 rows already runs faster widened. Where
// LibTorch's reduced-precision kernels are not vectorised at all (util/compat.h), every product.
constexpr int64_t kUpcastMinRows = compat::kVectorisedReducedPrecisionMatmul ? 8 : 1;

// The words after the colon of /proc/cpuinfo's first line starting with `key` (every core lists
// the same flags and vendor); none where the file or the line is missing.
std::vector<std::string> cpuinfo_words(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::vector<std::string> out;
    for (std::string w; words >> w;) out.push_back(w);
    return out;
  }
  return {};
}

const std::unordered_set<std::string>& cpu_flags() {
  static const std::unordered_set<std::string> flags = [] {
    const std::vector<std::string> words = cpuinfo_words("flags");
    return std::unordered_set<std::string>(words.begin(), words.end());
  }();
  return flags;
}

// vendor_id: "GenuineIntel", "AuthenticAMD"; empty where unreadable.
const std::string& cpu_vendor() {
  static const std::string vendor = [] {
    const std::vector<std::string> words = cpuinfo_words("vendor_id");
    return words.empty() ? std::string() : words.front();
  }();
  return vendor;
}

}  // namespace

CpuMatmul parse_cpu_matmul(const std::string& name) {
  if (name == "auto") return CpuMatmul::kAuto;
  if (name == "float32") return CpuMatmul::kFloat32;
  if (name == "native") return CpuMatmul::kNative;
  throw Error(ErrorCode::kInvalidArgument, "cpu_matmul '" + name + "' is not one of auto, float32, native");
}

std::string cpu_matmul_name(CpuMatmul mode) {
  switch (mode) {
    case CpuMatmul::kAuto: return "auto";
    case CpuMatmul::kFloat32: return "float32";
    case CpuMatmul::kNative: return "native";
  }
  return "auto";
}

bool cpu_has_flag(const std::string& flag) { return cpu_flags().count(flag) > 0; }

bool cpu_has_native_arithmetic(torch::ScalarType dtype) {
  // AVX512-BF16 alone is not enough on Intel: on a Sapphire Rapids VM whose hypervisor hides AMX
  // (avx512_bf16, no amx_bf16) LibTorch 2.11's bf16 GEMM ran at 153 GFLOP/s (its weight packed for
  // oneDNN: 152) against 240 in float32 and 181 widened per call (era_bench --machine), and the
  // 7B-width vision tower took 3.0 s in bf16 against 1.8-2.2 s widened (docs/perf/README.md).
  // On AMD it is: on a 2-core Zen 5 VM (EPYC, family 26) oneDNN's AVX512-BF16 GEMM ran at 936
  // GFLOP/s on LibTorch 2.11 and 955 on Debian's 1.13, against 202 / 252 in float32 (MKL /
  // OpenBLAS) and 149 / 200 widened per call; the 7B-width tower took 0.83 s against 2.35 s
  // widened, a 222-token prefill 0.87 s against 4.55 s.
  if (dtype == torch::kBFloat16)
    return cpu_has_flag("amx_bf16") || (cpu_has_flag("avx512_bf16") && cpu_vendor() == "AuthenticAMD");
  // AVX512-FP16 alone is not enough: on a Sapphire Rapids VM (avx512_fp16, no amx_fp16)
  // LibTorch 2.11's fp16 GEMM ran at 82 GFLOP/s against 168 in float32 and its fp16 GEMV at 5 GB/s,
  // and LibTorch 1.13 has no CPU fp16 matmul at all. Only AMX-FP16 is taken as native.
  if (dtype == torch::kHalf) return cpu_has_flag("amx_fp16") && compat::kVectorisedReducedPrecisionMatmul;
  return true;
}

int64_t cpu_upcast_min_rows(const ModelBundle& bundle, CpuMatmul mode) {
  if (!bundle.device.is_cpu() || bundle.dtype == torch::kFloat || mode == CpuMatmul::kNative) return 0;
  if (mode == CpuMatmul::kAuto && cpu_has_native_arithmetic(bundle.dtype)) return 0;
  return kUpcastMinRows;
}

bool cpu_matmuls_in_float32(const ModelBundle& bundle, CpuMatmul mode) {
  return !bundle.device.is_cpu() || bundle.dtype == torch::kFloat || cpu_upcast_min_rows(bundle, mode) > 0;
}

int64_t cpu_gemv_max_rows(const ModelBundle& bundle, CpuMatmul mode) {
  // Also where the CPU has bf16 arithmetic: a decode step is memory-bound, and on a Sapphire
  // Rapids VM with AMX LibTorch's bf16 GEMV streamed 18 GB/s against the kernel's 27 (docs/perf/).
  const bool narrow = bundle.dtype == torch::kBFloat16 || bundle.dtype == torch::kHalf;
  return bundle.device.is_cpu() && narrow && mode != CpuMatmul::kNative && gemv_kernel_available() ? kGemvMaxRows : 0;
}

int64_t int8_gemv_max_rows(const ModelBundle& bundle, CpuMatmul mode) {
  if (bundle.device.is_cuda()) return int8_cuda_kernel_max_rows();
  return bundle.device.is_cpu() && mode != CpuMatmul::kNative && gemv_kernel_available() ? kGemvMaxRows : 0;
}

bool cpu_packs_bf16_for_onednn() { return cpu_has_native_arithmetic(torch::kBFloat16) && onednn_packing_available(); }

bool cpu_splits_bf16_linears_by_rows() {
  return cpu_has_native_arithmetic(torch::kBFloat16) && at::hasMKLDNN() && !onednn_packing_available();
}

bool cpu_routes_linears_to_onednn(const ModelBundle& bundle, CpuMatmul mode) {
  return bundle.device.is_cpu() && bundle.dtype == torch::kBFloat16 && mode == CpuMatmul::kAuto &&
         (cpu_packs_bf16_for_onednn() || cpu_splits_bf16_linears_by_rows());
}

int apply_cpu_matmul(ModelBundle& bundle, CpuMatmul mode) {
  const int64_t upcast_rows = cpu_upcast_min_rows(bundle, mode);
  const int64_t gemv_rows = cpu_gemv_max_rows(bundle, mode), int8_gemv_rows = int8_gemv_max_rows(bundle, mode);
  const bool narrow_cpu = bundle.device.is_cpu() && (bundle.dtype == torch::kBFloat16 || bundle.dtype == torch::kHalf);
  const bool eager_decode = narrow_cpu && mode != CpuMatmul::kNative && cpu_has_native_arithmetic(bundle.dtype);
  // era::widened_attention's kernel is bf16's (model/cpu_widened_attention.h) and multiplies in
  // float32 on AVX-512: measured faster than LibTorch's bf16 attention where bf16 arithmetic is
  // AVX512-BF16 (Zen 5); with AMX, whose bf16 products are several times its float32 rate, the
  // fused bf16 kernel stays (not measured against it there).
  const bool per_head_kernel = eager_decode && bundle.dtype == torch::kBFloat16 && !cpu_has_flag("amx_bf16");
  // A decode step's attention in era's kernel, which reads the KV cache in place
  // (model/cpu_widened_attention.h): wherever that kernel has its AVX2 path, bf16 arithmetic or not.
  const bool decode_kernel = bundle.device.is_cpu() && bundle.dtype == torch::kBFloat16 && mode != CpuMatmul::kNative &&
                             attention_isa_available(AttentionIsa::kAvx2);
  int set = 0;
  for (torch::jit::Module* top : bundle.scripted_modules()) {
    for (torch::jit::Module m : top->modules()) {
      const bool widens = m.hasattr("cpu_upcast_min_rows"), hands_over = m.hasattr("gemv_max_rows");
      if (widens) m.setattr("cpu_upcast_min_rows", upcast_rows);
      // a weight-only int8 linear (tools/era_tools/int8_weights.py): the one module with `scales`
      const bool int8 = m.hasattr("scales");
      if (hands_over) m.setattr("gemv_max_rows", int8 ? int8_gemv_rows : gemv_rows);
      // the exported LayerNorm: in float32 where LibTorch's bf16 norm is the slow, per-step one,
      // whether or not the products are widened (kNative leaves LibTorch's kernels as they are)
      const bool norm = m.hasattr("float32_on_cpu");
      if (norm) m.setattr("float32_on_cpu", compat::kBf16LayerNormRoundsPerStep && narrow_cpu && mode != CpuMatmul::kNative);
      // the exported SDPA core: a decode step's attention as bf16 products where they are fast
      const bool eager = m.hasattr("eager_decode");
      if (eager) m.setattr("eager_decode", eager_decode);
      // the exported vision attention cores: era's per-head kernel where it beats LibTorch's bf16 one
      const bool per_head = m.hasattr("per_head_kernel");
      if (per_head) m.setattr("per_head_kernel", per_head_kernel);
      // the exported decoder attention cores: a one-token step in era's kernel
      const bool decode = m.hasattr("decode_kernel");
      if (decode) m.setattr("decode_kernel", decode_kernel);
      set += widens || hands_over || norm || eager || per_head || decode;
    }
  }
  if (bundle.native_decoder) {  // the same decisions, handed to era's own decoder
    layers::DecoderRouting routing;
    routing.linear = {gemv_rows, upcast_rows};
    routing.attention = {upcast_rows, decode_kernel, eager_decode};
    bundle.native_decoder->model().set_routing(routing);
    ++set;
  }
  if (auto* native = dynamic_cast<NativeVision*>(bundle.native_vision.get())) {  // and to its tower and projector
    layers::VisionRouting routing;
    // as on the exported Linears; through era::onednn_linear where the runtime routes the
    // tower's linears there (plain weights, rows split: era does not pack native weights yet)
    routing.linear = {gemv_rows, upcast_rows, cpu_routes_linears_to_onednn(bundle, mode)};
    routing.upcast_min_rows = upcast_rows;
    routing.per_head_kernel = per_head_kernel;
    routing.layer_norm_f32 = compat::kBf16LayerNormRoundsPerStep && narrow_cpu && mode != CpuMatmul::kNative;
    native->tower().set_routing(routing);
    native->projector().routing = routing.linear;
    if (routing.linear.onednn) bundle.row_split_linears = native->linear_count();
    ++set;
  }
  // Not the decoder's: its decode steps read the plain weights (era::gemv), and a second, packed
  // copy of them would double the model's memory. Its prefill already runs near the GEMM rate.
  if (cpu_routes_linears_to_onednn(bundle, mode) && !bundle.native_vision) {
    if (cpu_packs_bf16_for_onednn())
      bundle.onednn_packed_linears = pack_linears_for_onednn(bundle.vision) + pack_linears_for_onednn(bundle.projector);
    else bundle.row_split_linears = split_linears_by_rows(bundle.vision) + split_linears_by_rows(bundle.projector);
  }
  return set;
}

}  // namespace era
