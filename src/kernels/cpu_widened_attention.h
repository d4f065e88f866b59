#pragma once
// Internal header. Eager ("math") attention of a bf16 model with its products in float32, on the
// CPU, one head at a time: the widened counterpart of model/cpu_widened_linear.h for the vision
// tower and the decoder's prefill where LibTorch has no fused attention (Debian's 1.13) or the
// bundle asks for the eager numerics.
//
// What it computes, per head, is what the exported math cores computed in TorchScript (HF's
// eager numerics: tools/era_tools/llava_model.py, VisionMathCore and MathAttention):
//   S = bf16(Q K^T)  (float32 sums, rounded once),  S = bf16(S * scale),
//   P = bf16(softmax_float32(S with the causal keys at -inf)),  O = bf16(P V)  (float32 sums).
// Why one head at a time: the TorchScript composition wrote every head's [Tq, Tk] scores five
// times over (float32, bf16, float32 again, probabilities in float32 and bf16: 21 MB each for
// CLIP-L/336's 16 x 577 x 577) and converted and normalised them on LibTorch's threads, one of
// them on Debian's route; its batched products ran at a fifth of the GEMM rate there (1.13's bmm
// calls OpenBLAS once per matrix, and 64-deep products are its weak shape). Here each kernel
// thread takes whole heads: it widens the head's q, k (transposed) and v into buffers it keeps,
// multiplies with era's own AVX-512 / AVX2 register tiles (with AVX512-BF16: dot products of the
// bf16 operands, kept as bf16 pairs instead of widened), and keeps the head's scores (1.3 MB
// for CLIP) in cache between the two products; a single query row (a decode step) reads its k
// and v where they lie instead. One parallel region per call, no LibTorch GEMM
// inside: handing over between OpenBLAS's threads and era's per head cost more than the products
// (libgomp's workers spin after each region, on the cores OpenBLAS then needs). Sums may be
// blocked differently from the composition's: results agree to float32 summation order, so a
// bf16 output may differ by one unit in its last place.
//
// The exported cores call it through the TorchScript operator
// `era::widened_attention(Tensor q, Tensor k, Tensor v, float scale, int causal_offset, bool causal)
// -> Tensor` when the runtime widens products (`cpu_upcast_min_rows`, model/cpu_matmul.h). The
// schema is part of the bundle format: never change it.
#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace era {

// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] (one dtype, any strides) -> [B, H, Tq, Dv] in
// q's dtype (laid out as [B, Tq, H, Dv], so that the caller's transpose(1, 2).reshape is free).
// causal: query t sees keys 0 .. causal_offset + t only. bf16 on the CPU runs the kernel above;
// anything else the same formula in LibTorch operators (widened_attention_reference).
torch::Tensor widened_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                                int64_t causal_offset, bool causal);

// The formula above in LibTorch operators, exactly the exported TorchScript cores' composition
// (whole-tensor products in float32): the fallback, and the tests' reference.
torch::Tensor widened_attention_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                                          int64_t causal_offset, bool causal);

// The instruction sets the kernel has a path for, best first. It takes the best the CPU has.
// kAvx512Bf16: the products as AVX512-BF16 dot products of the bf16 operands themselves (exact
// products, float32 sums, as the widened ones), twice the multiplies per instruction.
enum class AttentionIsa { kAvx512Bf16, kAvx512, kAvx2, kScalar };
bool attention_isa_available(AttentionIsa isa);
// Pins the kernel to `isa` (nullopt: the best again), so that tests and comparisons run every
// path this CPU has; throws where the CPU lacks it. Process-wide: not for concurrent sessions.
void pin_attention_isa(std::optional<AttentionIsa> isa);

// Links the operator's registration into every binary that loads bundles (cpu_gemv.cpp's
// register_era_operators calls it).
void register_widened_attention_operator();

}  // namespace era
