#pragma once
// Internal header. The thread count of era's own CPU kernels (the decode GEMV, bf16 / fp16 / int8),
// apart from LibTorch's intra-op count. Beside an OpenBLAS with its own pthreads (Debian's
// libopenblas0-pthread; tools/setup.sh installs the OpenMP build, which shares LibTorch's pool) a
// session keeps LibTorch at one thread, so that LibTorch's OpenMP workers do not compete with
// OpenBLAS's during the big float32 products (util/cpu_threads.h). A decode step runs none of those: all its products are era's
// kernel, which followed LibTorch's count and so streamed the weights on one core.

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace era {

// 0 (the default): LibTorch's intra-op count. configure_cpu_threads sets it for each session.
void set_kernel_threads(int threads);
// The count in effect: the one set, else at::get_num_threads().
int kernel_threads();

// f(b, e) over contiguous pieces of [begin, end), each at least `grain` long, on at most
// kernel_threads() of OpenMP's threads (LibTorch's pool: the same runtime at::parallel_for uses).
// A file that calls it is compiled with OpenMP (CMakeLists.txt); without OpenMP it is
// at::parallel_for. Inside a parallel region it runs f on the calling thread. f must not throw.
template <class F>
void kernel_parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
#ifdef _OPENMP
  grain = std::max<int64_t>(1, grain);
  const int64_t pieces = (end - begin + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(kernel_threads(), pieces));
  if (threads <= 1 || omp_in_parallel()) {
    f(begin, end);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = std::max(grain, (end - begin + team - 1) / team);
    const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    if (b < e) f(b, e);
  }
#else
  at::parallel_for(begin, end, grain, f);
#endif
}

}  // namespace era
