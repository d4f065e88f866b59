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
#include "util/kernel_threads.h"

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

CpuThreadPlan plan_cpu_threads(int requested, int usable_cpus, bool torch_env_set, bool blas_own_threads, bool blas_env_set,
                               bool matmuls_in_blas) {
  CpuThreadPlan plan;
  if (requested > 0) {
    plan.torch_threads = requested;
    plan.kernel_threads = requested;
    return plan;
  }
  if (torch_env_set) return plan;
  if (!blas_own_threads) {
    plan.torch_threads = usable_cpus;
    return plan;
  }
  plan.torch_threads = matmuls_in_blas ? 1 : usable_cpus;
  // era's decode kernel runs between OpenBLAS's products, never beside them: every CPU.
  plan.kernel_threads = usable_cpus;
  // Set both ways: an earlier session of this process may have shrunk OpenBLAS's pool.
  if (!blas_env_set) plan.blas_threads = matmuls_in_blas ? usable_cpus : 1;
  return plan;
}

std::string blas_threads_note(bool blas_own_threads, int usable_cpus, int torch_threads, int requested) {
  if (!blas_own_threads || usable_cpus < 2 || torch_threads != 1 || requested > 0) return "";
  return "LibTorch runs on one thread beside OpenBLAS's pthread build, whose own threads take the " +
         std::to_string(usable_cpus) +
         " CPUs; OpenBLAS's OpenMP build shares LibTorch's threads and is faster (Debian: apt-get install "
         "libopenblas0-openmp, then update-alternatives --config libblas.so.3-<arch>; tools/setup.sh does both)";
}

void check_cpu_threads(int requested) {
  if (requested < 0 || requested > 1024)
    throw Error(ErrorCode::kInvalidArgument, "num_threads " + std::to_string(requested) + " is not between 0 and 1024");
}

int configure_cpu_threads(int requested, bool matmuls_in_blas) {
  check_cpu_threads(requested);
  const bool torch_env = std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS");
  const bool blas_env = std::getenv("OPENBLAS_NUM_THREADS") || std::getenv("GOTO_NUM_THREADS");
  const CpuThreadPlan plan =
      plan_cpu_threads(requested, usable_cpu_count(), torch_env, blas_runs_own_threads(), blas_env, matmuls_in_blas);
  if (plan.torch_threads > 0 && at::get_num_threads() != plan.torch_threads) at::set_num_threads(plan.torch_threads);
  set_kernel_threads(plan.kernel_threads);
  if (plan.blas_threads > 0) {
    using SetThreads = void (*)(int);
    const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (set != nullptr) set(plan.blas_threads);
  }
  return at::get_num_threads();
}

}  // namespace era
