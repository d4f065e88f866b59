#pragma once
// The git commit the tools were built from, for their --version: "<short hash>", with "-dirty"
// when tracked files had changes, or "unknown" (not built from a git checkout). Defined in a file
// generated at every build (cmake/git_commit.cmake), so only that file recompiles when it changes.

namespace era::cli {

const char* git_commit();

}  // namespace era::cli
