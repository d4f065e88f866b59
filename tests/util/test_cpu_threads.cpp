// LibTorch's and OpenBLAS's thread pools (util/cpu_threads.h): the policy, its application, and a
// session sizing them by where its bundle's products run.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "era/era.h"
#include "pipeline/session_internals.h"
#include "test_support.h"
#include "util/cpu_threads.h"
#include "util/kernel_threads.h"

namespace era {
namespace {

bool environment_sets_threads() {
  return std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS") || std::getenv("OPENBLAS_NUM_THREADS") ||
         std::getenv("GOTO_NUM_THREADS");
}

// OpenBLAS's pool size in this process, or 0 where no OpenBLAS is loaded.
int openblas_threads() {
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 0;
}

TEST(CpuThreads, PlanGivesTheCoresToWhicheverPoolRunsTheProducts) {
  // requested, cpus, torch env, OpenBLAS pthreads, OpenBLAS env, products in BLAS
  auto plan = plan_cpu_threads(3, 8, true, true, false, true);
  EXPECT_EQ(plan.torch_threads, 3);  // an explicit count wins, OpenBLAS untouched
  EXPECT_EQ(plan.blas_threads, 0);
  EXPECT_EQ(plan.kernel_threads, 3);  // era's kernel too
  plan = plan_cpu_threads(0, 8, true, true, false, false);
  EXPECT_EQ(plan.torch_threads, 0);  // OMP_NUM_THREADS / MKL_NUM_THREADS stand
  EXPECT_EQ(plan.blas_threads, 0);
  EXPECT_EQ(plan.kernel_threads, 0);  // and era's kernel follows them
  plan = plan_cpu_threads(0, 8, false, false, false, true);
  EXPECT_EQ(plan.torch_threads, 8);  // MKL or OpenMP OpenBLAS: one pool, every CPU
  EXPECT_EQ(plan.blas_threads, 0);
  EXPECT_EQ(plan.kernel_threads, 0);
  plan = plan_cpu_threads(0, 8, false, true, false, true);
  EXPECT_EQ(plan.torch_threads, 1);  // float32 products in pthread OpenBLAS: it gets the cores
  EXPECT_EQ(plan.blas_threads, 8);
  EXPECT_EQ(plan.kernel_threads, 8);  // and so does the decode kernel, which runs between them
  plan = plan_cpu_threads(0, 8, false, true, false, false);
  EXPECT_EQ(plan.torch_threads, 8);  // bf16 products in oneDNN: LibTorch gets them
  EXPECT_EQ(plan.blas_threads, 1);
  EXPECT_EQ(plan.kernel_threads, 8);
  plan = plan_cpu_threads(0, 8, false, true, true, false);
  EXPECT_EQ(plan.torch_threads, 8);
  EXPECT_EQ(plan.blas_threads, 0);  // OPENBLAS_NUM_THREADS stands
}

TEST(CpuThreads, DefaultIsOnePerUsableCpuAndAnExplicitCountWins) {
  const int before = at::get_num_threads();
  EXPECT_GE(usable_cpu_count(), 1);
  EXPECT_EQ(configure_cpu_threads(1), 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  if (std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS")) {
    EXPECT_EQ(configure_cpu_threads(0), 1);  // the environment's choice stands
  } else {
    EXPECT_EQ(configure_cpu_threads(0), blas_runs_own_threads() ? 1 : usable_cpu_count());
    EXPECT_EQ(configure_cpu_threads(0, /*matmuls_in_blas=*/false), usable_cpu_count());
  }
  test::expect_invalid_argument([] { configure_cpu_threads(-1); }, "num_threads -1");
  test::expect_invalid_argument([] { configure_cpu_threads(1025); }, "num_threads 1025");
  at::set_num_threads(before);
}

// Advice only where it applies: OpenBLAS's pthread build, several CPUs, LibTorch kept at one
// thread by era (not by a count the caller asked for).
TEST(CpuThreads, NotesTheOpenmpBuildOnlyWhereThePthreadBuildKeepsLibTorchAtOne) {
  const std::string note = blas_threads_note(true, 2, 1, 0);
  EXPECT_NE(note.find("libopenblas0-openmp"), std::string::npos) << note;
  EXPECT_NE(note.find("2 CPUs"), std::string::npos) << note;
  EXPECT_EQ(blas_threads_note(false, 2, 1, 0), "");  // the OpenMP build, MKL, or no OpenBLAS
  EXPECT_EQ(blas_threads_note(true, 1, 1, 0), "");   // one CPU: nothing to gain
  EXPECT_EQ(blas_threads_note(true, 2, 2, 0), "");   // LibTorch has every CPU (bf16 in oneDNN)
  EXPECT_EQ(blas_threads_note(true, 2, 1, 1), "");   // the caller asked for one thread
}

// Session::info() passes the advice on for this process's BLAS (run this test with
// LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread to see it given).
TEST(CpuThreads, SessionInfoCarriesTheBlasThreadsNote) {
  if (environment_sets_threads()) GTEST_SKIP() << "the environment sets the thread counts";
  const int before = at::get_num_threads();
  SessionOptions o;
  o.cpu_matmul = "float32";  // products in the float32 BLAS: where the pthread build keeps LibTorch at one
  {
    const Session s = Session::open(test::bundle_dir(), o);
    const std::string want = blas_threads_note(blas_runs_own_threads(), usable_cpu_count(), at::get_num_threads(), 0);
    EXPECT_EQ(SessionAccess::state(s).blas_threads_note, want);
    EXPECT_NE(s.info().performance_note.find(want), std::string::npos) << s.info().performance_note;
    if (blas_runs_own_threads() && usable_cpu_count() > 1) {
      EXPECT_FALSE(want.empty());
    }
  }
  o.num_threads = 1;
  {
    const Session s = Session::open(test::bundle_dir(), o);
    EXPECT_EQ(SessionAccess::state(s).blas_threads_note, "");  // asked for
  }
  at::set_num_threads(before);
  set_kernel_threads(0);
}

TEST(CpuThreads, SessionSizesThePoolsByWhereItsProductsRun) {
  if (environment_sets_threads()) GTEST_SKIP() << "the environment sets the thread counts";
  const int before = at::get_num_threads();
  const int cpus = usable_cpu_count();
  SessionOptions o;
  o.dtype = "bfloat16";
  o.cpu_matmul = "native";  // bf16 products in LibTorch's own kernels (oneDNN), on any CPU
  { Session s = Session::open(test::bundle_dir(), o); }
  EXPECT_EQ(at::get_num_threads(), cpus);
  EXPECT_EQ(kernel_threads(), cpus);
  if (blas_runs_own_threads()) {
    EXPECT_EQ(openblas_threads(), 1);
  }
  o.cpu_matmul = "float32";  // widened: the products run in the float32 BLAS
  { Session s = Session::open(test::bundle_dir(), o); }
  EXPECT_EQ(at::get_num_threads(), blas_runs_own_threads() ? 1 : cpus);
  EXPECT_EQ(kernel_threads(), cpus);  // the decode kernel: every CPU, beside either BLAS
  if (blas_runs_own_threads()) {
    EXPECT_EQ(openblas_threads(), cpus);
  }
  o.num_threads = 1;
  { Session s = Session::open(test::bundle_dir(), o); }
  EXPECT_EQ(kernel_threads(), 1);  // an explicit count holds for era's kernel too
  o.num_threads = 1025;
  test::expect_invalid_argument([&] { Session::open(test::bundle_dir(), o); }, "num_threads 1025");
  at::set_num_threads(before);
  set_kernel_threads(0);
}

}  // namespace
}  // namespace era
