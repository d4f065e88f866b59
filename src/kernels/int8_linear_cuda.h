#pragma once
// Internal header. era's CUDA kernels for weight-only int8 linears (model/int8_linear.h): the
// product over a few rows (the decode step of an int8 bundle on a GPU), and the weight's
// dequantisation for a larger call (prefill), whose product cuBLAS then runs. Compiled by nvcc into era_core only where
// the LibTorch found has CUDA (CMakeLists.txt); the .cu file includes no LibTorch header, so this
// interface takes raw pointers and the caller (int8_linear.cpp) checks shapes, dtypes, contiguity
// and alignment.
//
// Why era's own kernel: a decode step reads every weight once per token, so an int8 weight should
// cost half the bytes of a bf16 one. LibTorch 2.x's CUDA _weight_int8pack_mm runs one thread per
// output element, each walking its own weight row (loads of neighbouring threads K bytes apart),
// and without a kernel a call would convert the whole weight to bf16 first (read 1 byte, write 2,
// read 2 per weight). Here a warp reads four weight rows with 16-byte loads (each warp-wide load
// 512 contiguous bytes), converts the int8 values to float32 in registers, multiplies them against
// up to kInt8CudaMaxRows activation rows (each chunk of x widened once for the four rows), sums in
// float32 across the warp, and writes the scaled (plus bias) result in x's dtype: one launch per
// linear. On an H100 (tools/check_int8_cuda.py, docs/perf/README.md), one row against the 7B
// model's four linear shapes: 1.6-2.8 TB/s of int8 weights (cuBLAS: 2.0-2.7 TB/s of bf16 ones), so
// a product takes 0.48-0.67x the bf16 time; one row per warp (two to four loads in flight per
// lane) reached 1.3-1.8 TB/s.
#include <cstdint>

namespace era {

// The most activation rows per call (a decode step has one per sequence).
constexpr int64_t kInt8CudaMaxRows = 4;

// Element type of x and y.
enum class CudaFloat { kFloat32, kFloat16, kBfloat16 };

// y[m, n] = (sum_k x[m, k] * w[n, k]) * scales[n] + bias[n] (bias may be null), for m < M <=
// kInt8CudaMaxRows. x [M, K] and y [M, N] contiguous in `dtype`; w int8 [N, K] contiguous; scales
// and bias float32 [N]. K must be a multiple of 16 and x, w 16-byte aligned (16 weights per load).
// Launched on `stream` (a cudaStream_t); returns the launch's cudaError_t as an int (0: success).
int launch_int8_gemv_cuda(const void* x, const int8_t* w, const float* scales, const float* bias, void* y, int64_t M, int64_t N,
                          int64_t K, CudaFloat dtype, void* stream);

// out[n, k] = w[n, k] * scales[n], rounded once to `dtype`, for n < N: the weight of a call with
// more rows than the kernel above takes, handed to cuBLAS. Why scaled here rather than after the
// GEMM: the scales then cost no pass over the output, the GEMM's output is final (one rounding, the
// bias added by the GEMM itself), and an fp16 GEMM never sums the raw int8 values (up to 127x the
// real weights: fp16 overflows where the real product does not). Why a kernel: LibTorch's int8 to
// bf16 cast moved 0.7-1 TB/s on an H100 (docs/perf/); this one reads 16 int8 weights per thread with
// one 16-byte load and writes them with 16-byte stores. w int8 [N, K] and out [N, K] contiguous, K
// a multiple of 16, both 16-byte aligned; scales float32 [N]. Returns the launch's cudaError_t.
int launch_int8_dequantize_cuda(const int8_t* w, const float* scales, void* out, int64_t N, int64_t K, CudaFloat dtype,
                                void* stream);

}  // namespace era
