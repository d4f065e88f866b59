#pragma once
// Internal header. era's weight-only int8 linear: the kernel of bundles exported with
// `--int8-scheme weight-only` (tools/era_tools/int8_weights.py, the default scheme).
//
// The weight is stored as plain int8 [N, K] with one float32 scale per output row (symmetric:
// w ~ q * scale). The activations stay in the model's dtype: nothing about them is quantised, so
// the only error is the weights' rounding. Why not LibTorch's dynamically quantised linear (the
// "dynamic" scheme): it needs a quantisation engine and runs on the CPU only, its packed weights
// are opaque, and on Debian's LibTorch 1.13 (oneDNN, no fbgemm) a one-row product streamed the
// weights at a third of era's bf16 rate, so int8 decoding ran twice as slow as bf16 (docs/perf/README.md, "CPU
// speed"). This one reads the int8 bytes directly:
//  - a call of at most `gemv_max_rows` rows (a decode step, memory-bound) runs era's CPU kernel
//    (model/cpu_gemv.h), which converts 8 weights at a time to float32 in registers: half the
//    bytes of a bf16 weight per token;
//  - a larger call (prefill, the vision tower: compute-bound) on the CPU converts the weight a
//    slice of rows at a time to the matmul dtype and runs LibTorch's GEMM on it. int8 values are
//    exact in bf16, fp16 and float32, so the GEMM sees the stored weights unrounded; the scales are
//    applied to its float32 output;
//  - on a GPU (era built against a CUDA LibTorch) a call of up to kInt8CudaMaxRows rows runs era's
//    CUDA kernel, and a larger one dequantises the weight (scales applied, rounded once to the
//    GEMM's dtype) with era's CUDA kernel and runs cuBLAS on it (model/int8_linear_cuda.h);
//  - anything else (another device, K not a multiple of 16) takes the CPU's GEMM path's formula.
//
// The exported Int8Linear calls it through the TorchScript operator
//   era::int8_linear(Tensor x, Tensor weight, Tensor scales, Tensor? bias, int gemv_max_rows,
//                    int upcast_min_rows) -> Tensor
// whose schema is part of the bundle format: never change it. The Python side defines it with the
// reference formula (tools/era_tools/era_ops.py).
#include <torch/script.h>

#include <cstdint>

namespace era {

// y = (x @ weight^T) * scales + bias, in x's dtype. x [..., K]; weight int8 [N, K]; scales float32
// [N]; bias [N] or none. Rows <= gemv_max_rows (and a CPU with the kernel, or a GPU with
// int8_cuda_kernel_max_rows() >= rows): era's kernel. Otherwise
// the GEMM runs in float32 where upcast_min_rows > 0 and the call has at least that many rows
// (model/cpu_matmul.h: a bf16 model on a CPU without bf16 arithmetic), else in x's dtype.
torch::Tensor int8_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scales,
                          const c10::optional<torch::Tensor>& bias, int64_t gemv_max_rows, int64_t upcast_min_rows);

// The most rows a call may have for era's CUDA kernel: kInt8CudaMaxRows where era_core was built
// with its CUDA kernels (a CUDA LibTorch), 0 otherwise.
int64_t int8_cuda_kernel_max_rows();

// Registers era::int8_linear (called by register_era_operators, model/cpu_gemv.h).
void register_int8_linear_operator();

}  // namespace era
