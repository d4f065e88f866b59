#include "apps/bench/memory.h"

#include <fstream>
#include <sstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/device.h"

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
  const torch::Device d = device::resolve(device);  // a bad or unusable name fails here, clearly
  cuda_ = device::allocator_stats_available(d);
  if (cuda_) device_ = d;
}

int64_t MemoryProbe::current() const { return cuda_ ? device::allocated_bytes(device_) : proc_status_bytes("VmRSS"); }

bool MemoryProbe::reset_peak() {
  if (cuda_) {
    device::reset_peak_memory(device_);
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

int64_t MemoryProbe::peak() const { return cuda_ ? device::peak_allocated_bytes(device_) : proc_status_bytes("VmHWM"); }

std::string MemoryProbe::what() const {
  return cuda_ ? "CUDA allocator, device " + device_.str() : "CPU resident set (VmRSS / VmHWM)";
}

}  // namespace era::bench
