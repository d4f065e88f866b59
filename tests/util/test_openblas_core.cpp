// OpenBLAS's kernel set (util/openblas_core.h): the policy, and the tools' restart on this machine.
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <cstdlib>
#include <string>

#include "era/era.h"
#include "pipeline/session_internals.h"
#include "test_support.h"
#include "util/openblas_core.h"

namespace era {
namespace {

TEST(OpenblasCore, OnlyAFallbackBelowTheCpusLevelIsReplaced) {
  // core, AVX2 + FMA, AVX-512
  EXPECT_EQ(openblas_core_to_request("Prescott", true, true), "SkylakeX");  // Debian's 0.3.21 on an Emerald Rapids Xeon
  EXPECT_EQ(openblas_core_to_request("Prescott", true, false), "Haswell");
  EXPECT_EQ(openblas_core_to_request("Nehalem", true, false), "Haswell");
  EXPECT_EQ(openblas_core_to_request("Sandybridge", true, true), "SkylakeX");
  EXPECT_EQ(openblas_core_to_request("prescott", true, true), "SkylakeX");  // lower-case spelling
  EXPECT_EQ(openblas_core_to_request("Prescott", false, false), "");        // an old CPU: right as it is
  EXPECT_EQ(openblas_core_to_request("Sandybridge", false, false), "");
  EXPECT_EQ(openblas_core_to_request("Haswell", true, true), "");  // a choice made knowingly stands
  EXPECT_EQ(openblas_core_to_request("Zen", true, true), "");
  EXPECT_EQ(openblas_core_to_request("SkylakeX", true, true), "");
  EXPECT_EQ(openblas_core_to_request("Cooperlake", true, true), "");
  EXPECT_EQ(openblas_core_to_request("", true, true), "");  // no OpenBLAS
}

// A tool run: where LibTorch multiplies in OpenBLAS, the kernels era_bench reports are never a
// fallback below this CPU's level (the entry guard restarted it with OPENBLAS_CORETYPE). On the
// Emerald Rapids VM of docs/perf/intel-xeon-avx512.md this failed before the restart: "Prescott kernels".
TEST(OpenblasCore, ToolsRunOpenblasAtThisCpusLevel) {
  if (at::hasMKL()) GTEST_SKIP() << "LibTorch multiplies with MKL here";
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set in the environment";
  const auto r = test::run_command(test::era_bench_path() + " --machine --machine-seconds 0.5 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string tag = "LibTorch's BLAS: OpenBLAS, ";
  const auto at = r.out.find(tag);
  if (openblas_core_name().empty()) GTEST_SKIP() << "no OpenBLAS in this process";
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto begin = at + tag.size();
  const std::string core = r.out.substr(begin, r.out.find(' ', begin) - begin);
  EXPECT_EQ(openblas_core_to_request(core), "") << "era_bench ran OpenBLAS's " << core << " kernels";
}

// A program that is not one of era's tools (this test binary) is told what to set.
TEST(OpenblasCore, SessionNotesTheSettingWhereOpenblasFallsBack) {
  const Session s = Session::open(test::bundle_dir());
  const std::string core = openblas_core_for_this_process();
  if (core.empty()) {
    // nothing, or only the advice on OpenBLAS's pthread build (CpuThreads.*)
    EXPECT_EQ(s.info().performance_note, SessionAccess::state(s).blas_threads_note);
  } else {
    EXPECT_NE(s.info().performance_note.find("OPENBLAS_CORETYPE=" + core), std::string::npos) << s.info().performance_note;
    EXPECT_NE(s.info().performance_note.find(openblas_core_name() + " kernels"), std::string::npos);
  }
}

}  // namespace
}  // namespace era
