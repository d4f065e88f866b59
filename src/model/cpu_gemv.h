#pragma once
// Internal header. era's own CPU kernel for linears over a few rows with bfloat16 / float16
// weights (and int8 ones, for model/int8_linear.h): the decode step's matrix-vector products.
//
// A decode step is memory-bound: it reads every weight once per token, so its speed is the rate
// at which the weights stream from memory. LibTorch's reduced-precision GEMV on AVX2 machines
// reaches about 60 % of the machine's read bandwidth (README, "CPU speed"); this kernel widens
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
torch::Tensor gemv_linear(const torch::Tensor& x, const torch::Tensor& weight,
                          const c10::optional<torch::Tensor>& bias);

// The kernel itself: x [..., K] (any floating dtype, taken as float32) times weight [N, K]
// (bf16, fp16 or int8, on the CPU) transposed, summed in float32: [M, N] float32 with M = the
// rows of x. Every row of the weight is read once for all M rows (M small: kGemvMaxRows). The
// caller checks gemv_kernel_available() and the shapes (gemv_linear; model/int8_linear.h).
torch::Tensor gemv_products(const torch::Tensor& x, const torch::Tensor& weight);

// bf16 weights take an AVX-512 loop where the CPU has AVX-512 F + BW (16 weights a register),
// the AVX2 one elsewhere. allow_gemv_avx512(false) pins the AVX2 loop, so that tests and
// era_bench --machine run both on such a CPU; process-wide, not for concurrent sessions.
bool gemv_avx512_available();
void allow_gemv_avx512(bool allowed);

// How many threads the kernel's loop reaches (util/kernel_threads.h: kernel_threads(), when its
// file is compiled with OpenMP, as CMakeLists.txt sees to; one otherwise).
int parallel_for_threads();

// Makes sure the `era::` operators are registered before a bundle that calls them is loaded
// (their registration lives in cpu_gemv.cpp; calling this keeps that object in every link).
void register_era_operators();

}  // namespace era
