// era_fuzz_replay TARGET PATH...: runs every file under the PATHs (files or folders, recursively)
// through one fuzz target, without libFuzzer. ctest uses it to keep every input a fuzzing run
// ever found (tests/fuzz/corpus/) as a regression test in every build, sanitizers or not.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_targets.h"

namespace {

using Target = int (*)(const uint8_t*, size_t);

struct Entry {
  const char* name;
  Target run;
};

const Entry kTargets[] = {
    {"manifest", era::fuzz::manifest},
    {"question_line", era::fuzz::question_line},
    {"image_header", era::fuzz::image_header},
    {"npy", era::fuzz::npy},
    {"tokenizer_model", era::fuzz::tokenizer_model},
    {"era_config", era::fuzz::era_config},
    {"tokenizer_json", era::fuzz::tokenizer_json},
    {"safetensors", era::fuzz::safetensors},
#ifdef ERA_FUZZ_SERVER
    {"openai_request", era::fuzz::openai_request},
#endif
};

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const Entry* target = nullptr;
  if (argc >= 3)
    for (const auto& e : kTargets)
      if (argv[1] == std::string(e.name)) target = &e;
  if (!target) {
    std::fprintf(stderr, "usage: era_fuzz_replay TARGET PATH...\ntargets:");
    for (const auto& e : kTargets) std::fprintf(stderr, " %s", e.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& f : fs::recursive_directory_iterator(p))
        if (f.is_regular_file()) files.push_back(f.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "era_fuzz_replay: %s: not a file or folder\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "era_fuzz_replay: no inputs (an empty corpus tests nothing)\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::fprintf(stderr, "%s\n", f.c_str());  // the last name printed is the input at fault
    std::ifstream in(f, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    target->run(bytes.data(), bytes.size());
  }
  std::printf("%s: %zu inputs replayed\n", target->name, files.size());
  return 0;
}
