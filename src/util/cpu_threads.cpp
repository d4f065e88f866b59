#include "util/cpu_threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "era/error.h"

namespace era {

int usable_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool blas_runs_own_threads() {
  // OpenBLAS reports how it was built: 0 sequential, 1 its own pthreads, 2 OpenMP. Looked up in
  // the process (Debian's LibTorch 1.13 calls the system libblas.so.3, OpenBLAS when installed);
  // absent (PyPI's LibTorch: MKL, or no OpenBLAS) means no.
  // A LibTorch with MKL (PyPI's) multiplies with MKL, whatever else loaded OpenBLAS (Debian's
  // OpenCV does, through LAPACK).
  if (at::hasMKL()) return false;
  using GetParallel = int (*)();
  const auto get = reinterpret_cast<GetParallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  return get != nullptr && get() == 1;
}

int configure_cpu_threads(int requested) {
  // LibTorch starts one OS thread per intra-op thread: 100000 would take minutes to start.
  if (requested < 0 || requested > 1024)
    throw Error(ErrorCode::kInvalidArgument, "num_threads " + std::to_string(requested) + " is not between 0 and 1024");
  if (requested > 0) {
    at::set_num_threads(requested);
  } else if (!std::getenv("OMP_NUM_THREADS") && !std::getenv("MKL_NUM_THREADS")) {
    const int cpus = blas_runs_own_threads() ? 1 : usable_cpu_count();
    if (at::get_num_threads() != cpus) at::set_num_threads(cpus);
  }
  return at::get_num_threads();
}

}  // namespace era
