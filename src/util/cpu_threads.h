#pragma once
// Internal header. LibTorch's intra-op thread count, set once per Session::open.

namespace era {

// CPUs this process may run on (its affinity mask, so a container's or taskset's limit counts);
// std::thread::hardware_concurrency() where the mask cannot be read; at least 1.
int usable_cpu_count();

// Sets LibTorch's intra-op threads to `requested` when > 0. With 0: one per usable CPU, unless
// OMP_NUM_THREADS or MKL_NUM_THREADS is set (then LibTorch's own default stands). Debian's
// LibTorch 1.13 otherwise starts with a single thread on any machine; PyPI's already uses one per
// core. Throws kInvalidArgument outside 0..1024. Returns the count in effect.
int configure_cpu_threads(int requested);

}  // namespace era
