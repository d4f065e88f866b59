#include "bench/memory.h"

#include <fstream>
#include <sstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/compat.h"

namespace era::bench {

int64_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, field.size() + 1, field + ":") != 0) continue;
    std::istringstream ss(line.substr(field.size() + 1));
    int64_t kib = -1;
    ss >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

MemoryProbe::MemoryProbe(const std::string& device) {
  if (device.rfind("cuda", 0) == 0) {
    cuda_ = compat::cuda_memory_stats_available();
    const auto colon = device.find(':');
    if (colon != std::string::npos) device_index_ = std::stoi(device.substr(colon + 1));
  }
}

int64_t MemoryProbe::current() const {
  return cuda_ ? compat::cuda_allocated_bytes(device_index_) : proc_status_bytes("VmRSS");
}

bool MemoryProbe::reset_peak() {
  if (cuda_) {
    compat::reset_cuda_peak_memory(device_index_);
    return true;
  }
#if defined(__GLIBC__)
  malloc_trim(0);  // freed blocks of earlier configurations would otherwise hide this one's growth
#endif
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear) return false;
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

int64_t MemoryProbe::peak() const {
  return cuda_ ? compat::cuda_peak_allocated_bytes(device_index_) : proc_status_bytes("VmHWM");
}

std::string MemoryProbe::what() const {
  return cuda_ ? "CUDA allocator, device " + std::to_string(device_index_) : "CPU resident set (VmRSS / VmHWM)";
}

}  // namespace era::bench
