#pragma once
// Helpers for the scoring tests: answer records built in memory, and small files on disk.
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "apps/score/answers.h"

namespace era::score::test_util {

// One answer line in LLaVA's format.
inline std::string answer_line(const nlohmann::json& question_id, const std::string& text, const std::string& prompt = "q") {
  nlohmann::json j = {{"question_id", question_id}, {"prompt", prompt},        {"text", text},
                      {"answer_id", "x"},           {"model_id", "tiny-test"}, {"metadata", nlohmann::json::object()}};
  return j.dump() + "\n";
}

// An error record as the runner writes it.
inline std::string error_line(const nlohmann::json& question_id, const std::string& message = "image missing") {
  nlohmann::json j = {{"question_id", question_id}, {"prompt", "q"},           {"text", ""},
                      {"answer_id", "x"},           {"model_id", "tiny-test"}, {"metadata", {{"error", message}}}};
  return j.dump() + "\n";
}

inline AnswerFile answers_from(const std::string& jsonl) { return parse_answers(jsonl, "test.jsonl"); }

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f << content;
}

}  // namespace era::score::test_util
