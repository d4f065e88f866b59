#pragma once
// Internal header. The compute-bound CPU product of a weight stored narrower than the GEMM's
// dtype (bf16 / fp16 weights multiplied in float32, int8 ones in float32 or the model's dtype):
// the weight is converted a slice of rows at a time into one buffer per calling thread that
// lives as long as the thread, and LibTorch's GEMM writes each slice's columns straight into the
// output.
//
// Why a kept buffer: converting a slice into a fresh tensor per call (what the exported modules
// did in TorchScript before) has glibc hand out freshly mapped pages often enough that the kernel's
// page clearing and faults cost as much as the conversion itself; a Python probe of a 4096 x 4096
// bf16 weight at 160 rows ran at 113-122 GFLOP/s that way against 197-213 with one reused buffer
// (docs/perf/README.md). The buffer is at most kWidenSliceBytes per thread that calls it.
//
// The exported Linear (tools/era_tools/llava_model.py) calls it through the TorchScript operator
// `era::widened_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor` when the runtime asks it
// to widen (`cpu_upcast_min_rows`, model/cpu_matmul.h). The schema is part of the bundle format:
// never change it.
#include <torch/script.h>

#include <cstdint>

namespace era {

// Bytes of converted weight per GEMM call: narrower GEMMs cost each call its setup and its packing
// of x, a wider buffer leaves the caches. Measured with the 7B-width prefill of 222 tokens:
// int8 weights on docs/perf/'s AMX VM (oneDNN bf16 GEMM, three alternating runs each) 2.6-3.5 s
// with 2M-element slices, 1.2-1.8 s with 8M, 1.4-2.1 s with 16M, 3.1-3.3 s with the whole weight;
// bf16 weights widened on the Xeon without AMX (two alternating runs) 4.2-4.5 s with 4 MB slices,
// 3.5-3.8 s with 8 MB, 3.4-3.6 s with 16 MB, 3.6-3.8 s with 32 MB.
constexpr int64_t kWidenSliceBytes = int64_t{16} << 20;

// x2 [M, K] (contiguous, the GEMM's dtype) times weight [N, K] (any dtype LibTorch converts, on
// the CPU) transposed: [M, N] in x2's dtype, the weight converted kWidenSliceBytes at a time into
// the calling thread's buffer. The sums are LibTorch's GEMM's in that dtype.
torch::Tensor sliced_products(const torch::Tensor& x2, const torch::Tensor& weight);

// F.linear(x, weight, bias) with the products and sums in float32, rounded once to x's dtype:
// what a bf16 / fp16 model's GEMM computes, run through LibTorch's float32 GEMM (sliced_products
// on the CPU; a plain widened F.linear elsewhere).
torch::Tensor widened_linear(const torch::Tensor& x, const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias);

// Links the operator's registration into every binary that loads bundles (cpu_gemv.cpp's
// register_era_operators calls it).
void register_widened_linear_operator();

}  // namespace era
