#include "util/kernel_threads.h"

#include <atomic>

namespace era {

namespace {
std::atomic<int> g_kernel_threads{0};  // process-wide, as LibTorch's own count
}  // namespace

void set_kernel_threads(int threads) { g_kernel_threads.store(std::max(0, threads)); }

int kernel_threads() {
  const int set = g_kernel_threads.load();
  return set > 0 ? set : at::get_num_threads();
}

}  // namespace era
