#pragma once
// The question JSONL of LLaVA's evaluation scripts (one object per line):
//   {"question_id": <int|string>, "image": "<path under the image folder>", "text": "<question>",
//    "category": "<optional>"}
// or, for video benchmarks, "video": "<video file or folder of frame images under the image
// folder>" instead of (or besides) "image".
// A question's `line` is its 0-based position among the file's non-blank lines: the index of
// LLaVA's question list, the key of sharding, resume and merge (question_id is not unique in MME
// or TextVQA). A line that is not such an object is kept as a question with `error` set, so the
// runner can write an error record for it and go on.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace era::eval {

// Records keep their keys in insertion order, as LLaVA writes them.
using Json = nlohmann::ordered_json;

struct Question {
  int64_t line = 0;       // 0-based position among non-blank lines
  int64_t file_line = 0;  // 1-based physical line number, for messages
  Json question_id;       // copied as given (null when the line could not be parsed)
  std::string image;      // as given, relative to the image folder ("" when absent)
  std::string video;      // as given, relative to the image folder ("" when absent)
  std::string text;       // as given: the answer's `prompt` is exactly this
  std::string category;   // "" when absent
  std::string error;      // non-empty: the line is malformed; the other fields may be empty
};

// Parses one line (without its newline). Never throws: problems go to Question::error.
Question parse_question(const std::string& line_text, int64_t line, int64_t file_line);

// Reads the whole file. Throws era::Error(kInvalidArgument) only if it cannot be read.
std::vector<Question> read_questions(const std::string& path);

}  // namespace era::eval
