#include "util/openblas_core.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace era {

std::string openblas_core_name() {
  using CoreName = char* (*)();
  const auto get = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = get ? get() : nullptr;
  return name ? std::string(name) : std::string();
}

std::string openblas_core_to_request(const std::string& core, bool avx2_fma, bool avx512) {
  // OpenBLAS's x86 kernel sets below AVX2, compared in lower case (openblas_get_corename()
  // capitalises them in some versions and not in others).
  static const std::set<std::string> below_avx2 = {"katmai",      "coppermine", "northwood",  "prescott",     "banias",
                                                   "core2",       "penryn",     "dunnington", "nehalem",      "atom",
                                                   "sandybridge", "athlon",     "opteron",    "opteron_sse3", "barcelona",
                                                   "bobcat",      "bulldozer",  "piledriver", "steamroller"};
  std::string lower = core;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!avx2_fma || below_avx2.count(lower) == 0) return "";
  return avx512 ? "SkylakeX" : "Haswell";
}

std::string openblas_core_to_request(const std::string& core) {
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return openblas_core_to_request(core, avx2_fma, avx512);
}

std::string openblas_core_for_this_process() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  // PyPI's LibTorch carries MKL (and exports its symbols): its products never reach OpenBLAS.
  if (dlsym(RTLD_DEFAULT, "mkl_get_max_threads") != nullptr || dlsym(RTLD_DEFAULT, "MKL_Get_Max_Threads") != nullptr) return "";
  const std::string core = openblas_core_name();
  return core.empty() ? "" : openblas_core_to_request(core);
}

void restart_for_openblas_core(char** argv) {
  const std::string core = openblas_core_for_this_process();
  if (core.empty()) return;
  // Set before the exec, so that the new run finds it (and never restarts again).
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "era: could not restart with OPENBLAS_CORETYPE=%s (OpenBLAS runs its %s kernels)\n", core.c_str(),
               openblas_core_name().c_str());
}

}  // namespace era
