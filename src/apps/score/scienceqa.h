#pragma once
// ScienceQA-IMG (spec §4.3, LLaVA's eval_science_qa.py): letter parsing with three rules, accuracy
// over the test split, and the IMG subset = answers whose prompt contains "<image>".
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

struct SqaParse {
  std::string letter;  // "A".."Z" or "FAILED"
  int index = -1;      // 0-based choice index, -1 when FAILED or not among the first num_choices of A..E
};
// 1. text is exactly one of A..E; 2. len >= 3, text[0] in A..E and text[1:3] == ". ";
// 3. re.findall(r"The answer is ([A-Z]).", text) has exactly one match ('.' = any character but a
// newline, so one character must follow the letter). Otherwise FAILED.
SqaParse sqa_parse(const std::string& text, size_t num_choices);

struct SqaProblem {
  int answer = -1;  // index of the correct choice
  size_t num_choices = 0;
  bool has_image = false;  // problems.json "image" is set (informational; IMG membership comes from the prompt)
};
// problems.json ({pid: {"answer", "choices", "image", "split", ...}}), keeping the problems whose
// "split" equals `split` (problems without a "split" field are kept).
std::unordered_map<std::string, SqaProblem> read_sqa_problems(const std::string& path, const std::string& split = "test");

struct SqaResult {
  size_t total = 0, correct = 0;          // scored answers
  size_t img_total = 0, img_correct = 0;  // of those, the ones whose prompt contains "<image>"
  double accuracy = 0, img_accuracy = 0;  // %
  size_t error_records = 0, unmatched = 0, duplicates = 0, missing = 0;
  size_t failed_parses = 0;  // scored answers parsed as FAILED
};
// Keyed by question_id = problem id (the last answer of a problem counts). Problems without an
// answer are reported as missing and not scored (the official script counts them wrong in the
// overall accuracy; for a complete run both agree).
SqaResult score_sqa(const AnswerFile& answers, const std::unordered_map<std::string, SqaProblem>& problems);

}  // namespace era::score
