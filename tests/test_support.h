#pragma once
// Shared by every test: paths (the source tree and the fixture output built by the Python
// fixtures registered in tests/CMakeLists.txt) and running a command.
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "era/error.h"

namespace era::test {

inline std::string source_dir() { return ERA_SOURCE_DIR; }
inline std::string testdata_dir() { return ERA_TESTDATA_DIR; }
inline std::string bundle_dir() { return testdata_dir() + "/bundle-llava-1.5"; }
inline std::string checkpoint_dir() { return testdata_dir() + "/tiny-llava-1.5"; }
inline std::string next_bundle_dir() { return testdata_dir() + "/bundle-llava-next"; }
// make_random_bundle.py --preset tiny-onevision (SigLIP + Qwen2, byte-level BPE; no transformers).
inline std::string onevision_bundle_dir() { return testdata_dir() + "/bundle-llava-onevision"; }
inline std::string era_infer_path() { return ERA_INFER_PATH; }
inline std::string era_reduce_path() { return ERA_REDUCE_PATH; }
inline std::string era_score_path() { return ERA_SCORE_PATH; }
inline std::string era_eval_path() { return ERA_EVAL_PATH; }
inline std::string era_bench_path() { return ERA_BENCH_PATH; }

// A fresh, empty scratch folder under the build tree, unique per name.
inline std::string scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::path(testdata_dir()) / "scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// scratch_dir named after the running test (suite.name), so that tests which share a fixture, and
// which ctest runs in parallel processes, never share files.
inline std::string scratch_dir_for_this_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  std::replace(name.begin(), name.end(), '/', '_');  // parameterised tests are named "Prefix/Suite.Name/0"
  return scratch_dir(name);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

inline std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

struct CommandResult {
  int exit_code = -1;  // -1 if the process did not exit normally (a crash)
  std::string out, err;
};

// Runs `command` through the shell with stdout and stderr captured separately.
inline CommandResult run_command(const std::string& command) {
  const auto err_path = std::filesystem::temp_directory_path() / ("era_test_stderr_" + std::to_string(::getpid()));
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>" + err_path.string()).c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_path.string());
  std::filesystem::remove(err_path);
  return r;
}

// `f` must throw era::Error(kInvalidArgument) whose message contains `needle`.
inline void expect_invalid_argument(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace era::test
