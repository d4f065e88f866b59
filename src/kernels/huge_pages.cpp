#include "kernels/huge_pages.h"

#include <c10/util/accumulate.h>

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

namespace {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// A fresh zero-filled (anonymous) mapping of `bytes` starting on a 2 MiB boundary, its whole 2 MiB
// pages advised for huge pages, as a CPU tensor that unmaps it when freed; undefined where mmap
// fails. Over-allocated by one page: the untouched slack costs address space, not memory.
torch::Tensor mapped_tensor(at::IntArrayRef sizes, const torch::TensorOptions& options, int64_t bytes) {
  const size_t mapped = static_cast<size_t>(bytes + kHugePageBytes);
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return torch::Tensor();
  const auto start = (reinterpret_cast<uintptr_t>(base) + kHugePageBytes - 1) & ~static_cast<uintptr_t>(kHugePageBytes - 1);
  void* data = reinterpret_cast<void*>(start);
  const int64_t whole = bytes / kHugePageBytes * kHugePageBytes;
  if (whole > 0) (void)madvise(data, static_cast<size_t>(whole), MADV_HUGEPAGE);  // a hint: refused, it is plain memory
  return torch::from_blob(
      data, sizes, [base, mapped](void*) { munmap(base, mapped); }, options.device(torch::kCPU));
}
#endif

}  // namespace

torch::Tensor copy_to_huge_pages(const torch::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!t.device().is_cpu() || !huge_pages_available()) return t;
  const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
  if (bytes == 0) return t;
  torch::Tensor copy = mapped_tensor(t.sizes(), t.options(), bytes);
  if (!copy.defined()) return t;
  copy.copy_(t);
  return copy;
#else
  return t;
#endif
}

torch::Tensor zeros_in_huge_pages(at::IntArrayRef sizes, const torch::TensorOptions& options) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (options.device().is_cpu() && huge_pages_available()) {
    const int64_t bytes = c10::multiply_integers(sizes) * static_cast<int64_t>(options.dtype().itemsize());
    if (bytes >= kHugePageBytes) {
      torch::Tensor zeros = mapped_tensor(sizes, options, bytes);  // an anonymous mapping reads as zeros
      if (zeros.defined()) return zeros;
    }
  }
#endif
  return torch::zeros(sizes, options);
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
    const torch::Tensor copy = copy_to_huge_pages(t);
    if (copy.data_ptr() == t.data_ptr()) continue;  // no mapping to be had: it stays where it is
    t.set_data(copy);
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
