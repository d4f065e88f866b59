#include "kernels/int8_linear_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace era {

namespace {

constexpr int kWarpSize = 32;
// 8 warps a block (256 threads, 32 weight rows): blocks small enough that every SM holds several,
// so many 16-byte loads are in flight while the rows are summed.
constexpr int kWarpsPerBlock = 8;
constexpr int kWeightsPerLoad = 16;
// Weight rows per warp (each chunk of x widened once for all of them) and chunks per row each lane
// loads before using them: kRowsPerWarp * kUnroll 16-byte loads in flight per lane.
constexpr int kRowsPerWarp = 4;
constexpr int kUnroll = 1;

// 16 activations from x (16-element aligned) as float32.
__device__ inline void widen16(const float* p, float out[16]) {
  const float4* v = reinterpret_cast<const float4*>(p);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 f = v[i];
    out[4 * i] = f.x, out[4 * i + 1] = f.y, out[4 * i + 2] = f.z, out[4 * i + 3] = f.w;
  }
}

__device__ inline float2 to_float2(__half2 v) { return __half22float2(v); }
__device__ inline float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }

// The 16-bit types (__half, __nv_bfloat16), two at a time.
template <typename T>
__device__ inline void widen16(const T* p, float out[16]) {
  using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  const Pair* v = reinterpret_cast<const Pair*>(p);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float2 f = to_float2(v[i]);
    out[2 * i] = f.x, out[2 * i + 1] = f.y;
  }
}

__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// The 16 signed bytes of a 16-byte load as float32 (arithmetic shifts sign-extend each byte).
__device__ inline void int8x16_to_float(const int4& packed, float out[16]) {
  const int words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int b = 0; b < 4; ++b)
      out[4 * i + b] = static_cast<float>(static_cast<int>(static_cast<unsigned>(words[i]) << (24 - 8 * b)) >> 24);
  }
}

// Warp w of block b computes output columns n0 .. n0 + kRowsPerWarp - 1 (n0 = (b * kWarpsPerBlock
// + w) * kRowsPerWarp) for all M rows of x: lane l reads the 16-weight chunks l, l + 32, ... of
// each of its weight rows (each load of the warp is 512 contiguous bytes), widens each chunk of x
// once for all of those rows, and the warp sums its lanes' partial sums with shuffles. x (a few
// rows of K) is read by every warp and stays in the L1 / L2 caches.
template <typename T, int M>
__global__ void __launch_bounds__(kWarpSize* kWarpsPerBlock)
    int8_gemv_kernel(const T* __restrict__ x, const int8_t* __restrict__ w, const float* __restrict__ scales,
                     const float* __restrict__ bias, T* __restrict__ y, int64_t N, int64_t K) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize) * kRowsPerWarp;
  if (n0 >= N) return;
  const int64_t chunks = K / kWeightsPerLoad;
  const int4* rows[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {  // past N: re-read the last row, never stored
    rows[r] = reinterpret_cast<const int4*>(w + min(n0 + r, N - 1) * K);
  }
  float acc[M][kRowsPerWarp];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] = 0.f;
  }
  // Every load of a lane's group (kUnroll chunks of kRowsPerWarp rows) is issued before any is
  // used: a decode step is a stream of weight bytes, and its speed is how many are in flight.
  for (int64_t c0 = lane; c0 < chunks; c0 += kWarpSize * kUnroll) {
    int4 packed[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * kWarpSize;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) packed[u][r] = c < chunks ? __ldg(rows[r] + c) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * kWarpSize;
      if (c >= chunks) break;
      float wf[kRowsPerWarp][kWeightsPerLoad];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) int8x16_to_float(packed[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[kWeightsPerLoad];
        widen16(x + m * K + c * kWeightsPerLoad, xf);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
          for (int j = 0; j < kWeightsPerLoad; ++j) acc[m][r] = fmaf(xf[j], wf[r][j], acc[m][r]);
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], offset);
      }
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t n = n0 + r;
      if (n >= N) break;
      const float scale = scales[n], add = bias != nullptr ? bias[n] : 0.f;
#pragma unroll
      for (int m = 0; m < M; ++m) store(y + m * N + n, acc[m][r] * scale + add);
    }
  }
}

template <typename T>
cudaError_t launch_typed(const void* x, const int8_t* w, const float* scales, const float* bias, void* y, int64_t M, int64_t N,
                         int64_t K, cudaStream_t stream) {
  const int64_t rows_per_block = kWarpsPerBlock * kRowsPerWarp;
  const dim3 grid(static_cast<unsigned>((N + rows_per_block - 1) / rows_per_block)), block(kWarpSize * kWarpsPerBlock);
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  switch (M) {
    case 1: int8_gemv_kernel<T, 1><<<grid, block, 0, stream>>>(xt, w, scales, bias, yt, N, K); break;
    case 2: int8_gemv_kernel<T, 2><<<grid, block, 0, stream>>>(xt, w, scales, bias, yt, N, K); break;
    case 3: int8_gemv_kernel<T, 3><<<grid, block, 0, stream>>>(xt, w, scales, bias, yt, N, K); break;
    case 4: int8_gemv_kernel<T, 4><<<grid, block, 0, stream>>>(xt, w, scales, bias, yt, N, K); break;
    default: return cudaErrorInvalidValue;
  }
  static_assert(kInt8CudaMaxRows == 4, "the switch above instantiates M = 1..kInt8CudaMaxRows");
  return cudaGetLastError();
}

// Thread t of the grid dequantises the t-th 16-weight chunk of w (row t / (K / 16)): one 16-byte
// load, 16 products with the row's scale, 16 * sizeof(T) bytes stored as 16-byte vectors.
template <typename T>
__global__ void __launch_bounds__(256) int8_dequantize_kernel(const int8_t* __restrict__ w, const float* __restrict__ scales,
                                                              T* __restrict__ out, int64_t chunks, int64_t chunks_per_row) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  const int4 packed = __ldg(reinterpret_cast<const int4*>(w) + c);
  const float scale = __ldg(scales + c / chunks_per_row);
  float v[kWeightsPerLoad];
  int8x16_to_float(packed, v);
  constexpr int kPerStore = 16 / sizeof(T);  // elements per 16-byte store
  int4* dst = reinterpret_cast<int4*>(out + c * kWeightsPerLoad);
#pragma unroll
  for (int s = 0; s < kWeightsPerLoad / kPerStore; ++s) {
    alignas(16) T elems[kPerStore];
#pragma unroll
    for (int j = 0; j < kPerStore; ++j) store(&elems[j], v[s * kPerStore + j] * scale);
    dst[s] = *reinterpret_cast<const int4*>(elems);
  }
}

template <typename T>
cudaError_t dequantize_typed(const int8_t* w, const float* scales, void* out, int64_t N, int64_t K, cudaStream_t stream) {
  const int64_t chunks_per_row = K / kWeightsPerLoad, chunks = N * chunks_per_row;
  if (chunks == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((chunks + kThreads - 1) / kThreads)), block(kThreads);
  int8_dequantize_kernel<T><<<grid, block, 0, stream>>>(w, scales, static_cast<T*>(out), chunks, chunks_per_row);
  return cudaGetLastError();
}

}  // namespace

int launch_int8_dequantize_cuda(const int8_t* w, const float* scales, void* out, int64_t N, int64_t K, CudaFloat dtype,
                                void* stream) {
  if (N < 0 || K % kWeightsPerLoad != 0) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CudaFloat::kFloat32: return dequantize_typed<float>(w, scales, out, N, K, s);
    case CudaFloat::kFloat16: return dequantize_typed<__half>(w, scales, out, N, K, s);
    case CudaFloat::kBfloat16: return dequantize_typed<__nv_bfloat16>(w, scales, out, N, K, s);
  }
  return cudaErrorInvalidValue;
}

int launch_int8_gemv_cuda(const void* x, const int8_t* w, const float* scales, const float* bias, void* y, int64_t M, int64_t N,
                          int64_t K, CudaFloat dtype, void* stream) {
  if (M < 1 || M > kInt8CudaMaxRows || N < 1 || K % kWeightsPerLoad != 0) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CudaFloat::kFloat32: return launch_typed<float>(x, w, scales, bias, y, M, N, K, s);
    case CudaFloat::kFloat16: return launch_typed<__half>(x, w, scales, bias, y, M, N, K, s);
    case CudaFloat::kBfloat16: return launch_typed<__nv_bfloat16>(x, w, scales, bias, y, M, N, K, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace era
