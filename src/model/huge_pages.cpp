#include "model/huge_pages.h"

#include <fstream>
#include <sstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace era {

bool huge_pages_available() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool available = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!std::getline(f, line)) return false;
    // the setting in effect is the bracketed word: "always [madvise] never"
    return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
  }();
  return available;
#else
  return false;
#endif
}

torch::Tensor copy_to_huge_pages(const torch::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!t.device().is_cpu() || !huge_pages_available()) return t;
  const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
  if (bytes == 0) return t;
  // Over-allocate by one page and start at the first 2 MiB boundary: the untouched slack costs
  // address space, not memory.
  const size_t mapped = static_cast<size_t>(bytes + kHugePageBytes);
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return t;
  const auto start = (reinterpret_cast<uintptr_t>(base) + kHugePageBytes - 1) & ~static_cast<uintptr_t>(kHugePageBytes - 1);
  void* data = reinterpret_cast<void*>(start);
  const int64_t whole = bytes / kHugePageBytes * kHugePageBytes;
  if (whole > 0) (void)madvise(data, static_cast<size_t>(whole), MADV_HUGEPAGE);  // a hint: refused, it is plain memory
  torch::Tensor copy = torch::from_blob(
      data, t.sizes(), [base, mapped](void*) { munmap(base, mapped); }, t.options());
  copy.copy_(t);
  return copy;
#else
  return t;
#endif
}

int64_t move_to_huge_pages(torch::jit::Module& module, int64_t min_bytes) {
  if (!huge_pages_available()) return 0;
  torch::NoGradGuard no_grad;
  int64_t moved = 0;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    if (!attribute.value.isTensor()) continue;
    torch::Tensor t = attribute.value.toTensor();
    if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous() || t.is_quantized() || t.is_mkldnn()) continue;
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (bytes < min_bytes || t.storage_offset() != 0 || static_cast<int64_t>(t.storage().nbytes()) != bytes ||
        t.storage().use_count() != 1) {
      continue;
    }
    t.set_data(copy_to_huge_pages(t));
    moved += bytes;
  }
  return moved;
}

int64_t resident_huge_page_bytes() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("AnonHugePages:", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace era
