#pragma once
// Internal header. LibTorch's intra-op thread count (and OpenBLAS's), set once per Session::open.

#include <string>

namespace era {

// CPUs this process may run on (its affinity mask, so a container's or taskset's limit counts);
// std::thread::hardware_concurrency() where the mask cannot be read; at least 1.
int usable_cpu_count();

// Is LibTorch's BLAS an OpenBLAS that runs its own pthread pool (Debian's libopenblas0-pthread)?
// Its GEMMs then use every core by themselves, and LibTorch's OpenMP workers beside them only
// compete: on docs/perf/'s machine, decode 2800 ms/token with 2 LibTorch threads against 907 with
// one (and 737 with 2 threads over libopenblas0-openmp, which shares LibTorch's OpenMP pool).
bool blas_runs_own_threads();

// How many threads LibTorch and OpenBLAS get (0 = leave as it is), and era's own kernels
// (util/kernel_threads.h; 0 = as many as LibTorch).
struct CpuThreadPlan {
  int torch_threads = 0;
  int blas_threads = 0;
  int kernel_threads = 0;
};

// The policy, without side effects. `requested` > 0 wins. Otherwise, unless the environment sets
// LibTorch's count (`torch_env_set`: OMP_NUM_THREADS / MKL_NUM_THREADS), one LibTorch thread per
// usable CPU, except beside an OpenBLAS with its own pthreads (`blas_own_threads`): where the
// session's big products run in that BLAS (`matmuls_in_blas`: a float32 model, or a bf16 one
// widened to float32) LibTorch keeps one thread and OpenBLAS every CPU; where they do not (a bf16
// model multiplied natively, by oneDNN, on a CPU with bf16 arithmetic) LibTorch takes every CPU
// and OpenBLAS, left with the small float32 products, one thread (its pthreads would only compete
// with LibTorch's: on the AMX Xeon VM of docs/perf/, Debian route, a request of the 7B-width bf16
// model took 8.4-9.4 s with one LibTorch thread and 4.8-5.2 s with two and OpenBLAS at one).
// OpenBLAS is left alone where OPENBLAS_NUM_THREADS / GOTO_NUM_THREADS is set (`blas_env_set`).
// era's decode kernel gets every CPU beside such an OpenBLAS whatever LibTorch gets (it runs
// between OpenBLAS's products, not beside them), and the requested count where one is requested.
CpuThreadPlan plan_cpu_threads(int requested, int usable_cpus, bool torch_env_set, bool blas_own_threads, bool blas_env_set,
                               bool matmuls_in_blas);

// Empty, or advice for a process that sizes its pools itself (no `requested` count) and found
// OpenBLAS's pthread build with LibTorch left at one thread on several CPUs: OpenBLAS's OpenMP
// build shares LibTorch's threads, so LibTorch keeps every core for the work between the
// products (docs/perf/intel-xeon-avx512.md: the vision tower 18 % faster). Session::info()
// passes it on as its performance_note.
std::string blas_threads_note(bool blas_own_threads, int usable_cpus, int torch_threads, int requested);

// Throws kInvalidArgument for a requested count outside 0..1024 (LibTorch starts one OS thread per
// intra-op thread: 100000 would take minutes to start).
void check_cpu_threads(int requested);

// Applies plan_cpu_threads for this process, after check_cpu_threads. Debian's LibTorch 1.13
// otherwise starts with a single thread on any machine; PyPI's already uses one per core. Returns
// LibTorch's count in effect.
int configure_cpu_threads(int requested, bool matmuls_in_blas = true);

}  // namespace era
