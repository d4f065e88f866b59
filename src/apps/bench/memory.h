#pragma once
// Memory readings for benchmarks, honest per configuration.
//
// CPU: the process's resident set (VmRSS) and its high-water mark (VmHWM) from /proc/self/status.
// VmHWM is process-lifetime by default, so reset_peak() first hands freed heap back to the OS
// (malloc_trim) and then resets the mark (writing "5" to /proc/self/clear_refs, Linux >= 4.0):
// the peak measured after it belongs to what runs after it. Where the reset is refused the
// readings say so (peak_is_per_configuration = false) rather than report a lifetime peak as one
// configuration's.
// CUDA: the caching allocator's allocated-bytes counters (util/device.h), reset per configuration.
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace era::bench {

struct MemoryProbe {
  // device: "cpu", "cuda" or "cuda:N" (as SessionOptions::device); an unknown or unusable device
  // throws era::Error (util/device.h's resolve).
  explicit MemoryProbe(const std::string& device);

  // Bytes resident now: RSS on CPU, allocated by tensors on CUDA.
  int64_t current() const;
  // Starts a new peak window; returns false where the peak cannot be reset (then peak() is the
  // process-lifetime peak).
  bool reset_peak();
  // The highest current() since reset_peak().
  int64_t peak() const;
  bool is_cuda() const { return cuda_; }
  std::string what() const;  // "CPU resident set (VmRSS/VmHWM)" / "CUDA allocator (device N)"

 private:
  bool cuda_ = false;
  torch::Device device_{torch::kCPU};
};

// One field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 where unavailable.
int64_t proc_status_bytes(const std::string& field);

}  // namespace era::bench
