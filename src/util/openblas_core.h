#pragma once
// Internal header. Which kernels OpenBLAS runs, and the restart that makes it run the right ones.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels by CPU model when it loads. A model newer
// than the library falls back to "Prescott" (SSE3): Debian 12's OpenBLAS 0.3.21 on an Emerald
// Rapids Xeon (family 6, model 207) multiplied float32 at 34 GFLOP/s on 2 cores, against 233 with
// its SkylakeX kernels (docs/perf/intel-xeon-avx512.md). On the Debian route every
// float32 product of LibTorch, and every bf16 one widened to float32, runs in OpenBLAS. The choice
// can only be changed through OPENBLAS_CORETYPE before the library loads, that is before main():
// so the command-line tools restart themselves once with it set (cli/entry.h), and a Session in
// another program logs a warning that says what to set.

#include <string>

namespace era {

// OpenBLAS's kernel set in this process (openblas_get_corename()), or "" where none is loaded.
std::string openblas_core_name();

// The policy, without side effects: the kernel set to ask for where OpenBLAS runs `core` on a CPU
// with these features, or "" to keep it. Only a fallback below AVX2 on a CPU with AVX2 + FMA is
// replaced: by "SkylakeX" where the CPU has AVX-512 (F, CD, BW, DQ, VL), else by "Haswell". A
// choice OpenBLAS made knowingly (Haswell or Zen kernels on an AVX-512 CPU, say) stands.
std::string openblas_core_to_request(const std::string& core, bool avx2_fma, bool avx512);
// The same on this CPU's features.
std::string openblas_core_to_request(const std::string& core);

// For this process: openblas_core_to_request for the loaded OpenBLAS and this CPU, or "" where no
// OpenBLAS is loaded, LibTorch multiplies with MKL (PyPI's; OpenBLAS then only serves OpenCV's
// LAPACK), or OPENBLAS_CORETYPE is already set (the user's choice, or this restart's).
std::string openblas_core_for_this_process();

// Where openblas_core_for_this_process() names a kernel set: sets OPENBLAS_CORETYPE and replaces
// the process by a fresh run of the same program with the same arguments (execv of
// /proc/self/exe: same pid, same open files; nothing has been read or written yet when the tools
// call it). Returns only where nothing needs doing or the exec failed (the run then goes on with
// the slow kernels).
void restart_for_openblas_core(char** argv);

}  // namespace era
