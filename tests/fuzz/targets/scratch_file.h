#pragma once
// Parsers that take a path (a bundle folder holding manifest.json, a SentencePiece model file,
// the --era-config file) are fed through one scratch folder a process and target, whose file is
// rewritten for every input: the fuzzer then runs the same reading code users hit.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace era::fuzz {

// Writes `data` to <TMPDIR>/era-fuzz-<stem>-<pid>/<file_name>; returns that folder.
inline std::string scratch_folder_with(const char* stem, const char* file_name, const uint8_t* data, size_t size) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/era-fuzz-" + stem + "-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/" + file_name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) __builtin_trap();  // the harness itself failed, not the parser
  return dir;
}

}  // namespace era::fuzz
