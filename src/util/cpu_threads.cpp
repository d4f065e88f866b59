#include "util/cpu_threads.h"

#include <ATen/Parallel.h>
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

int configure_cpu_threads(int requested) {
  // LibTorch starts one OS thread per intra-op thread: 100000 would take minutes to start.
  if (requested < 0 || requested > 1024)
    throw Error(ErrorCode::kInvalidArgument, "num_threads " + std::to_string(requested) + " is not between 0 and 1024");
  if (requested > 0) {
    at::set_num_threads(requested);
  } else if (!std::getenv("OMP_NUM_THREADS") && !std::getenv("MKL_NUM_THREADS")) {
    const int cpus = usable_cpu_count();
    if (at::get_num_threads() != cpus) at::set_num_threads(cpus);
  }
  return at::get_num_threads();
}

}  // namespace era
