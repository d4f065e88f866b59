#include <string>

#include "apps/eval/question_file.h"
#include "fuzz_targets.h"
#include "targets/swallow.h"

// parse_question promises never to throw: malformed lines become Question::error.
int era::fuzz::question_line(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const auto q = era::eval::parse_question(line, 0, 1);
  (void)q;
  return 0;
}
