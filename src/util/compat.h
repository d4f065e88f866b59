#pragma once
// LibTorch version differences live here and nowhere else.
//
// Debian ships LibTorch 1.13 (CPU); GPU machines use LibTorch 2.x with CUDA. Code outside this
// header never tests TORCH_VERSION_* itself. (What differs between CUDA and CPU-only builds lives in
// util/device.h.)
#include <torch/script.h>
#include <torch/version.h>

#include <cstdint>
#include <optional>
#include <vector>

#define ERA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace era::compat {

// Whether LibTorch's CPU kernels for bfloat16 / float16 matrix products are vectorised. 2.x's
// are (one-row products run near float32's bandwidth, so only compute-bound calls gain from
// widening to float32); Debian's 1.13, without MKL, multiplies them element by element:
// measured on docs/perf/'s machine 1.5 GFLOP/s for a bf16 GEMM and 1.6 GB/s for a bf16 GEMV,
// where float32 gives 180 GFLOP/s and 10 GB/s, so there every product is widened.
inline constexpr bool kVectorisedReducedPrecisionMatmul = ERA_TORCH_AT_LEAST(2, 0);

// LibTorch's quantisation engines for int8 linears, fastest first on x86 CPUs: x86 (2.x: fbgemm
// or oneDNN picked per shape), fbgemm, oneDNN (Debian's LibTorch 1.13 has no fbgemm), QNNPACK.
inline std::vector<at::QEngine> quantized_engines_by_preference() {
#if ERA_TORCH_AT_LEAST(2, 0)
  return {at::QEngine::X86, at::QEngine::FBGEMM, at::QEngine::ONEDNN, at::QEngine::QNNPACK};
#else
  return {at::QEngine::FBGEMM, at::QEngine::ONEDNN, at::QEngine::QNNPACK};
#endif
}

// LibTorch's oneDNN linear with a weight packed once (mkldnn::_reorder_linear_weight and
// mkldnn::_linear_pointwise, model/onednn_linear.h): 2.x. model/onednn_linear.cpp looks the
// operators up by name; this says where they are expected (the tests check it).
inline constexpr bool kHasOnednnPackedLinear = ERA_TORCH_AT_LEAST(2, 0);

// How LibTorch multiplies a bf16 tensor by a number (TorchScript's `scores * scale`): 1.13 rounds
// the number to bf16 first, 2.x multiplies by it in float32. Measured: x * 1/sqrt(32) over 10^5
// bf16 values equals x * bf16(1/sqrt(32)) everywhere on 1.13 and x * float(1/sqrt(32)) everywhere
// on 2.11 (they differ in 2.5 % of the values). model/cpu_widened_attention.cpp follows it.
inline constexpr bool kBf16TimesScalarRoundsTheScalar = !ERA_TORCH_AT_LEAST(2, 0);

// LibTorch 1.13's CPU layer_norm on a bf16 input works on bf16 vectors and rounds between its
// steps; 2.x's computes in float32 and rounds once. Measured ([577, 1024], CLIP-L's width, 2
// threads): 1.13's bf16 norm 3.7 ms against 0.5 ms for the float32 norm of the widened input, a
// third of its outputs a bf16 step away from that float32 norm rounded once, which 2.11's bf16
// kernel matches. Where products are widened anyway, the exported LayerNorm is told to normalise
// in float32 (model/cpu_matmul.cpp, tools/era_tools/llava_model.py: LayerNorm.float32_on_cpu).
inline constexpr bool kBf16LayerNormRoundsPerStep = !ERA_TORCH_AT_LEAST(2, 0);

// at::scaled_dot_product_attention exists from 2.0; its `scale` argument from 2.1.
inline constexpr bool kHasSdpa = ERA_TORCH_AT_LEAST(2, 1);

// The LibTorch this build compiled against (model/export_compat.h compares a bundle's exporter with it).
inline constexpr int kLibTorchMajor = TORCH_VERSION_MAJOR;
inline constexpr int kLibTorchMinor = TORCH_VERSION_MINOR;

// softmax(q k^T * scale + mask) v in the input dtype. `mask` is an additive float mask that
// broadcasts to [.., Tq, Tk]. On LibTorch >= 2.1 this is the fused SDPA call with an explicit
// scale; on 1.13 the same formula with the softmax in float32.
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const std::optional<at::Tensor>& mask, double scale) {
#if ERA_TORCH_AT_LEAST(2, 1)
  c10::optional<at::Tensor> m;
  if (mask) m = *mask;
  return at::scaled_dot_product_attention(q, k, v, m, 0.0, false, scale);
#else
  auto scores = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (mask) scores = scores + mask->to(at::kFloat);
  return at::matmul(at::softmax(scores, -1), v.to(at::kFloat)).to(q.scalar_type());
#endif
}

}  // namespace era::compat
