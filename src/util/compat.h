#pragma once
// LibTorch version differences live here and nowhere else.
//
// Debian ships LibTorch 1.13 (CPU); GPU machines use LibTorch 2.x with CUDA. Code outside this
// header never tests TORCH_VERSION_* itself.
#include <torch/script.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdint>
#include <optional>

// CMake defines ERA_WITH_CUDA_ALLOCATOR when LibTorch was built with CUDA (target c10_cuda).
#if defined(ERA_WITH_CUDA_ALLOCATOR)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#define ERA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace era::compat {

// at::scaled_dot_product_attention exists from 2.0; its `scale` argument from 2.1.
inline constexpr bool kHasSdpa = ERA_TORCH_AT_LEAST(2, 1);

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

// True when this LibTorch build can run on a CUDA device right now.
inline bool cuda_available() { return torch::cuda::is_available(); }

// The CUDA caching allocator's byte counters for one device (all pools): what tensors hold now,
// and the most they held since the last reset_cuda_peak_memory. False / 0 without CUDA.
// (1.13 takes an int device, 2.x a c10::DeviceIndex; both name the stat index 0 "aggregate".)
inline bool cuda_memory_stats_available() {
#if defined(ERA_WITH_CUDA_ALLOCATOR)
  return cuda_available();
#else
  return false;
#endif
}
inline void reset_cuda_peak_memory(int device) {
#if defined(ERA_WITH_CUDA_ALLOCATOR)
  torch::cuda::synchronize(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
#else
  (void)device;
#endif
}
inline int64_t cuda_peak_allocated_bytes(int device) {
#if defined(ERA_WITH_CUDA_ALLOCATOR)
  torch::cuda::synchronize(device);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].peak;
#else
  (void)device;
  return 0;
#endif
}
inline int64_t cuda_allocated_bytes(int device) {
#if defined(ERA_WITH_CUDA_ALLOCATOR)
  torch::cuda::synchronize(device);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].current;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace era::compat
