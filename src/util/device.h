#pragma once
// Where tensors run. The one place era turns a device name into a torch::Device, checks that this
// LibTorch build and this machine can use it, and calls LibTorch's CUDA-specific APIs (the
// caching allocator's counters, synchronisation). Every other file takes a torch::Device that came
// from here and only moves tensors to it; tests/util/test_device.cpp keeps it that way.
//
// Two builds meet here: Debian's LibTorch 1.13 has no CUDA at all, PyTorch's wheel (the PyPI route)
// has CUDA compiled in but may run on a machine without a GPU. A request for "cuda" fails with a
// message that says which of the two is the case, and what to do.
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace era::device {

// This LibTorch build has CUDA compiled in (its libtorch_cuda is linked).
bool cuda_compiled();
// CUDA devices usable now: 0 without CUDA in the build, without a driver or without a GPU.
int cuda_device_count();
// "cpu", "cuda" (device 0) or "cuda:N" -> the device, checked usable; anything else, a CUDA device
// on a build or machine without one, or an index past the last GPU: Error kInvalidArgument naming
// the device and the reason.
torch::Device resolve(const std::string& name);

// Waits for the device's queued work (timings, memory counters); nothing to do on the CPU.
void synchronize(const torch::Device& device);

// The CUDA caching allocator's byte counters (all pools): what tensors hold now, and the most they
// held since reset_peak_memory. Available only for a CUDA device on a CUDA build.
bool allocator_stats_available(const torch::Device& device);
void reset_peak_memory(const torch::Device& device);
int64_t allocated_bytes(const torch::Device& device);
int64_t peak_allocated_bytes(const torch::Device& device);

// LibTorch's current CUDA stream on `device` (a cudaStream_t, as void*: the interface of era's
// CUDA kernels has no LibTorch types, model/int8_linear_cuda.h), for those kernels to launch on in
// order with LibTorch's own work. Error kInvalidArgument off CUDA or on a build without it.
void* current_cuda_stream(const torch::Device& device);

}  // namespace era::device
