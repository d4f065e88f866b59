#pragma once
// Internal header. LibTorch's intra-op thread count, set once per Session::open.

namespace era {

// CPUs this process may run on (its affinity mask, so a container's or taskset's limit counts);
// std::thread::hardware_concurrency() where the mask cannot be read; at least 1.
int usable_cpu_count();

// Is LibTorch's BLAS an OpenBLAS that runs its own pthread pool (Debian's libopenblas0-pthread)?
// Its GEMMs then use every core by themselves, and LibTorch's OpenMP workers beside them only
// compete: on the README's machine, decode 2800 ms/token with 2 LibTorch threads against 907 with
// one (and 737 with 2 threads over libopenblas0-openmp, which shares LibTorch's OpenMP pool).
bool blas_runs_own_threads();

// Sets LibTorch's intra-op threads to `requested` when > 0. With 0: one per usable CPU (one if
// blas_runs_own_threads()), unless OMP_NUM_THREADS or MKL_NUM_THREADS is set (then LibTorch's own
// default stands). Debian's LibTorch 1.13 otherwise starts with a single thread on any machine;
// PyPI's already uses one per core. Throws kInvalidArgument outside 0..1024. Returns the count in
// effect.
int configure_cpu_threads(int requested);

}  // namespace era
