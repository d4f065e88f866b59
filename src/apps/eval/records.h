#pragma once
// The records of an answers file, one JSON object per line.
//
// Answer (LLaVA's model_vqa_loader format, so LLaVA's converters and scorers read it as is):
//   {"question_id": <copied>, "prompt": <the question's text, verbatim>, "text": <answer, stripped>,
//    "answer_id": <22-character random id, shortuuid style>, "model_id": <name>,
//    "metadata": {"line": i, "method": "era", "tokens": 64, "visual_tokens": 64,
//                 "generated_tokens": n, "finish_reason": "eos"|"length", "batch_size": b,
//                 "timings": {"preprocess_ms", "vision_ms", "reduce_ms", "prefill_ms", "decode_ms",
//                             "total_ms"}}}
//   (`keep_ratio` is added when the run used one; with --batch-size > 1 the timings are the
//   batch's, shared by its items.)
// Error (an item that could not be answered; it has no "text", so no scorer mistakes it for one):
//   {"question_id": <copied, or null for an unparsable line>, "line": i, "error": "<message>",
//    "metadata": {"line": i, "error": "<message>"}}
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "apps/eval/question_file.h"
#include "era/era.h"

namespace era::eval {

// What every answer of a run shares.
struct RunSettings {
  std::string model_id;
  std::string method = kUnreducedMethod;
  int64_t tokens = 0;  // the nominal budget as requested (0: none / keep_ratio)
  float keep_ratio = 0.0f;
};

Json answer_record(const Question& q, const Result& r, const RunSettings& run, const std::string& answer_id, int64_t batch_size);
Json error_record(const Question& q, const std::string& message);

// One line of JSON, UTF-8 as is; invalid UTF-8 (a generation cut inside a character) is replaced
// by U+FFFD instead of failing.
std::string to_line(const Json& record);

// One line read back from an answers file.
struct StoredRecord {
  int64_t line = -1;
  bool is_error = false;
  Json json;
};
// Throws era::Error(kInvalidArgument) naming `where` if the line is not an era_eval record (not
// JSON, or no line index).
StoredRecord parse_record(const std::string& text, const std::string& where);

// Random 22-character ids over shortuuid's 57-letter alphabet (128 random bits), like the
// answer_id of LLaVA's scripts.
class AnswerIdGenerator {
 public:
  AnswerIdGenerator();
  std::string next();

 private:
  std::mt19937_64 rng_;
};

}  // namespace era::eval
