#pragma once
// The one entry guard of every command-line tool: argument parsing, the error line and the exit
// codes are the same in all of them (docs/cli.md, "Exit codes"):
//   0    success
//   2    refused: a bad flag, file, bundle, image, prompt or option (nothing was done, or the
//        run could not start or go on); the one error line names the item
//   3    failed while working: the model failed (out of memory, device error), or some items of a
//        batch failed and their error records were written (era_eval)
//   4    internal error (a bug: please report the line)
//   128+N  stopped by signal N (era_eval finishes the current batch first)
// Header-only: the tools are thin.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "apps/cli/build_info.h"
#include "apps/cli/git_commit.h"
#include "era/error.h"
#include "era/version.h"
#include "util/openblas_core.h"

namespace era::cli {

enum ExitCode : int { kExitOk = 0, kExitRefused = 2, kExitFailed = 3, kExitInternal = 4 };

// The first non-empty line of an exception's text (LibTorch appends backtraces).
inline std::string first_line(const std::string& text) {
  size_t start = text.find_first_not_of("\r\n");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find_first_of("\r\n", start) - start);
}

inline int exit_code_of(const Error& e) { return e.code() == ErrorCode::kRuntime ? kExitFailed : kExitRefused; }

// "<tool> (era <version>, commit <hash>[-dirty] | unknown; LibTorch <version>, <CUDA | CPU only>,
// <build type> build)": every tool's --version, so a bug report names the exact build.
inline std::string version_line(const std::string& tool) {
  return tool + " (era " + version_string() + ", commit " + git_commit() + "; LibTorch " + ERA_BUILD_LIBTORCH + ", " +
         ERA_BUILD_CUDA + ", " + ERA_BUILD_TYPE + " build)";
}

// First restarts the process where OpenBLAS runs kernels below this CPU's (util/openblas_core.h).
// Parses `argv` into `app` (--help and --version print and exit 0; a parse error prints one line
// and exits 2),
// then runs `body`. An era::Error prints "<tool>: error: <message>" and exits 2 (3 for kRuntime),
// anything else "<tool>: internal error: <message>" and 4. `tool` may change during the run
// (era_eval's "merge" subcommand), so it is read when the error is printed.
inline int run_tool(const std::function<std::string()>& tool, CLI::App& app, int argc, char** argv,
                    const std::function<int()>& body) {
  restart_for_openblas_core(argv);
  app.set_version_flag("--version", version_line(tool()), "print the era version and the build, then exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", tool().c_str(), first_line(e.what()).c_str());
    return kExitRefused;
  }
  spdlog::set_level(spdlog::level::warn);
  try {
    return body();
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", tool().c_str(), first_line(e.what()).c_str());
    return exit_code_of(e);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: internal error: %s\n", tool().c_str(), first_line(e.what()).c_str());
    return kExitInternal;
  }
}

inline int run_tool(const char* tool, CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  return run_tool([tool] { return std::string(tool); }, app, argc, argv, body);
}

}  // namespace era::cli
