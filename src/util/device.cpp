#include "util/device.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <mutex>

#include "era/error.h"

// CMake defines ERA_WITH_CUDA when the LibTorch it found was built with CUDA (target c10_cuda).
#if defined(ERA_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace era::device {
namespace {

const std::string kTorchVersion = TORCH_VERSION;

bool is_cuda_name(const std::string& name) { return name == "cuda" || name.rfind("cuda:", 0) == 0; }

// "cuda:N" -> N; "cuda" -> 0. Strict: no sign, spaces or trailing characters.
int parse_cuda_index(const std::string& name) {
  if (name == "cuda") return 0;
  const std::string digits = name.substr(5);
  const bool ok = !digits.empty() && digits.size() <= 4 && digits.find_first_not_of("0123456789") == std::string::npos;
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument, "unknown device '" + name + "' (use cpu, cuda or cuda:N)");
  }
  return std::stoi(digits);
}

#if defined(ERA_WITH_CUDA)
c10::DeviceIndex cuda_index(const torch::Device& device) { return device.has_index() ? device.index() : 0; }
#endif

}  // namespace

bool cuda_compiled() {
#if defined(ERA_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
  if (!cuda_compiled()) return 0;
  // No driver or no GPU: LibTorch reports 0 devices (it does not throw).
  return static_cast<int>(torch::cuda::device_count());
}

torch::Device resolve(const std::string& name) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  if (!is_cuda_name(name)) {
    throw Error(ErrorCode::kInvalidArgument, "unknown device '" + name + "' (use cpu, cuda or cuda:N)");
  }
  const int index = parse_cuda_index(name);
  if (!cuda_compiled()) {
    throw Error(ErrorCode::kInvalidArgument,
                "device '" + name + "' requested, but this era was built against LibTorch " + kTorchVersion +
                    " without CUDA (Debian's LibTorch is CPU-only); build it against PyTorch's CUDA-enabled "
                    "LibTorch (tools/setup.sh --route pypi) or use --device cpu");
  }
  const int count = cuda_device_count();
  if (count == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "device '" + name + "' requested, but no CUDA device is usable on this machine (LibTorch " + kTorchVersion +
                    " has CUDA, but found no GPU or no NVIDIA driver); use --device cpu");
  }
  if (index >= count) {
    throw Error(ErrorCode::kInvalidArgument, "device '" + name + "' requested, but this machine has " + std::to_string(count) +
                                                 " CUDA device" + (count == 1 ? "" : "s") + " (cuda:0" +
                                                 (count > 1 ? " .. cuda:" + std::to_string(count - 1) : "") + ")");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void synchronize(const torch::Device& device) {
#if defined(ERA_WITH_CUDA)
  if (device.is_cuda()) torch::cuda::synchronize(cuda_index(device));
#else
  (void)device;
#endif
}

bool allocator_stats_available(const torch::Device& device) {
  if (!device.is_cuda() || !cuda_compiled() || cuda_device_count() == 0) return false;
  // The caching allocator is set up, for every device at once, when LibTorch first initialises
  // CUDA (its first CUDA tensor); asked before that (a tool's baseline before the model is
  // loaded), LibTorch 2.x throws "Invalid device argument: did you call init?". A one-element
  // tensor, once per process, initialises it (and is freed).
  static std::once_flag initialised;
  std::call_once(initialised, [&] { static_cast<void>(torch::empty({1}, torch::TensorOptions().device(device))); });
  return true;
}

// (LibTorch 1.13 takes an int device, 2.x a c10::DeviceIndex; both name stat index 0 "aggregate".)
void reset_peak_memory(const torch::Device& device) {
#if defined(ERA_WITH_CUDA)
  if (!allocator_stats_available(device)) return;
  synchronize(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index(device));
#else
  (void)device;
#endif
}

int64_t allocated_bytes(const torch::Device& device) {
#if defined(ERA_WITH_CUDA)
  if (!allocator_stats_available(device)) return 0;
  synchronize(device);
  return c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device)).allocated_bytes[0].current;
#else
  (void)device;
  return 0;
#endif
}

int64_t peak_allocated_bytes(const torch::Device& device) {
#if defined(ERA_WITH_CUDA)
  if (!allocator_stats_available(device)) return 0;
  synchronize(device);
  return c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device)).allocated_bytes[0].peak;
#else
  (void)device;
  return 0;
#endif
}

void* current_cuda_stream(const torch::Device& device) {
#if defined(ERA_WITH_CUDA)
  if (device.is_cuda()) return c10::cuda::getCurrentCUDAStream(cuda_index(device)).stream();
#endif
  throw Error(ErrorCode::kInvalidArgument, "no CUDA stream on device '" + device.str() + "' (" +
                                               (cuda_compiled() ? "not a CUDA device" : "this era has no CUDA") + ")");
}

}  // namespace era::device
