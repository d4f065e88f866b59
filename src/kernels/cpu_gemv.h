#pragma once
// Internal header. era's own CPU kernel for linears over a few rows with bfloat16 / float16
// weights (and int8 ones, for model/int8_linear.h): the decode step's matrix-vector products.
//
// A decode step is memory-bound: it reads every weight once per token, so its speed is the rate
// at which the weights stream from memory. LibTorch's reduced-precision GEMV on AVX2 machines
// reaches about 60 % of the machine's read bandwidth (docs/perf/README.md); this kernel widens
// each 8-element bf16 / fp16 chunk to float32 in registers and multiplies it against the
// float32 activations with FMA, one pass over the weight rows split between the intra-op threads.
//
// The exported Linear (tools/era_tools/llava_model.py) calls it through the TorchScript operator
// `era::gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor` (= F.linear(x, weight, bias)) when
// a call has at most `gemv_max_rows` rows; the runtime sets that attribute at load
// (model/cpu_matmul.h; 0 as exported: the exporter's Python side defines the operator with
// F.linear, tools/era_tools/era_ops.py). The schema is part of the bundle format: never change it.
#include <torch/script.h>

#include <cstdint>

namespace era {

// Does this CPU run the vectorised kernel (AVX2 + FMA + F16C)? Elsewhere era::gemv is F.linear.
bool gemv_kernel_available();

// The most rows for which the kernel beats LibTorch's own product (past it, the weights are
// re-read per row group and the call becomes compute-bound: model/cpu_matmul.h widens those).
constexpr int64_t kGemvMaxRows = 4;

// F.linear(x, weight, bias) for x [..., K] and weight [N, K]: the kernel where it applies (a CPU
// tensor, bf16 / fp16 weight, at most kGemvMaxRows rows, the CPU has it), LibTorch's otherwise.
// The result has x's dtype; the sums run in float32 and round once, as LibTorch's do.
torch::Tensor gemv_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias);

// The kernel itself: x [..., K] (float32, bf16 or fp16) times weight [N, K] (bf16, fp16 or int8,
// on the CPU) transposed, summed in float32, then y = sum * scales[n] + bias[n] (each where
// defined; scales float32 [N]: int8 weights' per-row scales) rounded once to out_dtype (float32,
// bf16 or fp16): [M, N] with M = the rows of x. Every row of the weight is read once for all M rows
// (M small: kGemvMaxRows). The caller checks gemv_kernel_available() and the shapes (gemv_linear;
// model/int8_linear.h).
torch::Tensor gemv_fused(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scales,
                         const c10::optional<torch::Tensor>& bias, torch::ScalarType out_dtype);
// gemv_fused without scales or bias, in float32.
torch::Tensor gemv_products(const torch::Tensor& x, const torch::Tensor& weight);

// The kernel's loops for bf16 weights, from the plainest. kAvx2: each 8 weights widened to float32
// and multiplied by float32 activations; kAvx512: the same, 16 a register; kAvx512Bf16: bf16
// activations too (a bf16 model's), multiplied pairwise by AVX512-BF16's dot product, nothing
// widened. fp16 weights take kAvx2's loop, int8 ones their own (AVX2). A call takes the best loop
// the CPU has that its formats allow (kAvx512Bf16 only for bf16 activations).
enum class GemvLoop { kAvx2 = 0, kAvx512 = 1, kAvx512Bf16 = 2 };
GemvLoop gemv_best_loop();  // the best this CPU has (kAvx2 where the kernel runs at all)
GemvLoop gemv_bf16_loop();  // the one bf16 weights take now: the best, at most the limit
// Caps the loop, so that tests and era_bench --machine run each one on a CPU that has a better
// one; process-wide, not for concurrent sessions. kAvx512Bf16 (the default) lifts the cap.
void limit_gemv_loop(GemvLoop limit);

// How many threads the kernel's loop reaches (util/kernel_threads.h: kernel_threads(), when its
// file is compiled with OpenMP, as CMakeLists.txt sees to; one otherwise).
int parallel_for_threads();

// Makes sure the `era::` operators are registered before a bundle that calls them is loaded
// (their registration lives in cpu_gemv.cpp; calling this keeps that object in every link).
void register_era_operators();

}  // namespace era
