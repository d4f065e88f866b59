#pragma once
// Paths shared by every test: the source tree and the fixture output (built by the Python
// fixtures registered in tests/CMakeLists.txt).
#include <string>

namespace era::test {

inline std::string source_dir() { return ERA_SOURCE_DIR; }
inline std::string testdata_dir() { return ERA_TESTDATA_DIR; }
inline std::string bundle_dir() { return testdata_dir() + "/bundle-llava-1.5"; }
inline std::string checkpoint_dir() { return testdata_dir() + "/tiny-llava-1.5"; }
inline std::string era_infer_path() { return ERA_INFER_PATH; }

}  // namespace era::test
