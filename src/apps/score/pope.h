#pragma once
// POPE (spec §4.5, LLaVA's eval_pope.py): per split (adversarial, popular, random), the answers of
// that category, in answer-file order, are paired BY POSITION with the lines of the split's label
// file coco_pope_<split>.json (POPE @ e3e39262). Answers are parsed with LLaVA's first-sentence
// heuristic. Headline: the mean of the per-split F1 scores (x100), as CDPruner prints it.
#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

// LLaVA's parse: keep the text before the first '.', delete ',', split on single spaces; "no" if a
// word is exactly "No", "not" or "no", otherwise "yes" (so "NO", "Nope" and "" are yes).
bool pope_says_yes(const std::string& text);

struct PopeMetrics {
  size_t tp = 0, fp = 0, tn = 0, fn = 0;
  // Fractions in [0, 1]; precision/recall/f1 are 0 when their denominator is 0.
  double accuracy = 0, precision = 0, recall = 0, f1 = 0, yes_ratio = 0;
  size_t n() const { return tp + fp + tn + fn; }
};
// Positive = yes. Pairs up to the shorter of the two lists.
PopeMetrics pope_metrics(const std::vector<bool>& pred_yes, const std::vector<bool>& label_yes);

struct PopeSplit {
  std::string name;
  PopeMetrics metrics;
  size_t answers = 0;        // answer records of this category (error records included)
  size_t labels = 0;         // lines in the label file
  size_t error_records = 0;  // their label positions are skipped
};

struct PopeResult {
  std::vector<PopeSplit> splits;          // sorted by name
  double mean_f1 = 0, mean_accuracy = 0;  // fractions, over the splits that have answers
  size_t unmatched = 0;  // answers whose question_id is not in the question file or whose category has no label file
  size_t error_records() const;
};

// question_id -> category of a question JSONL (llava_pope_test.jsonl).
std::unordered_map<std::string, std::string> read_question_categories(const std::string& path);
// The label files: `path` is a folder holding coco_pope_<split>.json files (other files are
// ignored) or one such file. Each line's "label": "no" -> false, anything else -> true.
std::map<std::string, std::vector<bool>> read_pope_labels(const std::string& path);

PopeResult score_pope(const AnswerFile& answers, const std::unordered_map<std::string, std::string>& categories,
                      const std::map<std::string, std::vector<bool>>& labels);

}  // namespace era::score
