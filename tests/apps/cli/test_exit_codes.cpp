// One entry guard for every tool (src/apps/cli/entry.h): the same exit-code meanings and one error line
// "<tool>: error: ..." naming the item, whatever went wrong where.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "era/version.h"
#include "test_support.h"

namespace era {
namespace {

struct Tool {
  std::string name, path;
};

std::vector<Tool> tools() {
  return {{"era_infer", test::era_infer_path()},
          {"era_eval", test::era_eval_path()},
          {"era_bench", test::era_bench_path()},
          {"era_score", test::era_score_path()},
          {"era_reduce", test::era_reduce_path()}};
}

void expect_one_error_line(const test::CommandResult& r, const std::string& tool, const std::string& needle) {
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind(tool + ": error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

TEST(ExitCodes, HelpIsZeroAndAnUnknownFlagIsTwoWithOneLine) {
  for (const auto& t : tools()) {
    EXPECT_EQ(test::run_command(t.path + " --help").exit_code, 0) << t.name;
    const auto bad = test::run_command(t.path + " --no-such-flag 1");
    EXPECT_EQ(bad.exit_code, 2) << t.name;
    expect_one_error_line(bad, t.name, "(see --help)");  // CLI11 may name a missing required flag first
  }
}

// Every tool, era_server too, says which era (the CMake project's version), which commit and which
// LibTorch it is, and exits 0 without loading anything:
//   era_infer (era 0.1.0, commit 30ad607-dirty; LibTorch 1.13.0, CPU only, Release build)
TEST(ExitCodes, VersionIsZeroAndNamesTheEraVersionCommitAndBuild) {
  EXPECT_STREQ(ERA_VERSION_STRING, ERA_PROJECT_VERSION);
  std::vector<Tool> all = tools();
  if (!std::string(ERA_SERVER_PATH).empty()) all.push_back({"era_server", ERA_SERVER_PATH});
  const std::regex line(
      "(era_[a-z]+) \\(era ([0-9]+\\.[0-9]+\\.[0-9]+), commit ([0-9a-f]{7,40}(-dirty)?|unknown); "
      "LibTorch [^,]+, (CUDA|CPU only), [A-Za-z]+ build\\)\n");
  for (const auto& t : all) {
    const auto r = test::run_command(t.path + " --version");
    EXPECT_EQ(r.exit_code, 0) << t.name << ": " << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(r.out, m, line)) << t.name << ": " << r.out;
    EXPECT_EQ(m[1].str(), t.name);
    EXPECT_EQ(m[2].str(), ERA_PROJECT_VERSION) << r.out;
  }
}

TEST(ExitCodes, ABadValueIsTwoNamingTheFlag) {
  const auto r = test::run_command(test::era_infer_path() + " -m " + test::bundle_dir() + " -p hi -n notanumber");
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r, "era_infer", "max-new-tokens");
  const auto m = test::run_command(test::era_infer_path() + " -p hi");  // -m is required
  EXPECT_EQ(m.exit_code, 2);
  expect_one_error_line(m, "era_infer", "--model");
}

TEST(ExitCodes, AnUnknownMethodIsTwoInEveryToolThatTakesOne) {
  const std::string image = test::source_dir() + "/tests/data/sample.png";
  const auto infer = test::run_command(test::era_infer_path() + " -m " + test::bundle_dir() + " -p hi --method erra");
  EXPECT_EQ(infer.exit_code, 2);  // no image: refused all the same
  expect_one_error_line(infer, "era_infer", "unknown reduction method 'erra'");
  const auto bench =
      test::run_command(test::era_bench_path() + " -m " + test::bundle_dir() + " -i " + image + " --methods full,erra");
  EXPECT_EQ(bench.exit_code, 2);
  EXPECT_NE(bench.err.find("unknown reduction method 'erra'"), std::string::npos) << bench.err;
}

}  // namespace
}  // namespace era
