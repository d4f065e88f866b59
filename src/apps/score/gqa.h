#pragma once
// GQA testdev-balanced (spec §4.2): LLaVA's convert_gqa_for_eval.py turns each answer into
// text.rstrip('.').lower(); the official eval.py (LLaVA's copy) scores exact string equality with
// the gold `answer` over the balanced questions.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

struct GqaQuestion {
  std::string answer;
  bool balanced = true;    // isBalanced (absent: true)
  std::string structural;  // types.structural (query, verify, logical, choose, compare), "" if absent
};

// testdev_balanced_questions.json: {qid: {"answer", "isBalanced", "types": {"structural"}, ...}}.
// Only those fields are read.
std::unordered_map<std::string, GqaQuestion> read_gqa_questions(const std::string& path);

// The converter's prediction: all trailing '.' removed, then lowercased.
std::string gqa_prediction(const std::string& text);

struct GqaResult {
  double accuracy = 0;  // % over scored questions
  size_t scored = 0, correct = 0;
  size_t error_records = 0, unmatched = 0, duplicates = 0, unbalanced = 0, missing = 0;
  struct Group {
    std::string name;
    size_t questions = 0, correct = 0;
    double accuracy = 0;
  };
  std::vector<Group> by_structural;  // sorted by name
};

// Keyed by question_id (the last answer of a question counts). Answers to unbalanced questions are
// not scored; `missing` counts balanced questions with no answer.
GqaResult score_gqa(const AnswerFile& answers, const std::unordered_map<std::string, GqaQuestion>& questions);

}  // namespace era::score
