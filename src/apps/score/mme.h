#pragma once
// MME (spec §4.6): LLaVA's convert_answer_to_mme.py joins each answer with the MME release's
// ground truth, and the official eval_tool/calculation.py scores acc + acc+ per subtask (max 200),
// summed into Perception (10 subtasks, max 2000) and Cognition (4 subtasks, max 800).
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

// calculation.py's parse of pred.lower(): exactly "yes"/"no", else "yes" if the first 4 characters
// contain "yes", else "no" if they contain "no", else "other" (always wrong).
std::string mme_parse(const std::string& text);

const std::vector<std::string>& mme_perception_subtasks();  // existence, count, ..., OCR
const std::vector<std::string>& mme_cognition_subtasks();   // commonsense_reasoning, ...

// One scored question: its subtask, the image it belongs to (acc+ needs every question of an
// image right), the gold "yes"/"no" and the raw prediction.
struct MmeItem {
  std::string subtask, image, gold, prediction;
  bool is_error = false;  // an error record: not scored, and its image leaves acc+
};

struct MmeSubtask {
  std::string name;
  size_t questions = 0, correct = 0, other = 0;  // other: answers parsed as neither yes nor no
  size_t images = 0, images_all_correct = 0;
  double acc = 0, acc_plus = 0;  // %
  double score() const { return acc + acc_plus; }
};

struct MmeResult {
  std::vector<MmeSubtask> subtasks;      // perception subtasks, cognition subtasks, then others, each in table order
  double perception = 0, cognition = 0;  // sums over the subtasks present
  double total() const { return perception + cognition; }
  std::vector<std::string> missing_subtasks;  // of the 14 official ones, those with no answers
  size_t error_records = 0, unmatched = 0;
  size_t incomplete_images = 0;  // images left out of acc+ because one of their questions errored
};

// Scores items grouped by (subtask, image) in order of first appearance (the official tool pairs
// consecutive lines; LLaVA's file keeps both questions of an image adjacent, so this is the same).
MmeResult mme_scores(const std::vector<MmeItem>& items);

// The MME release's yes/no ground truth under `root` (the folder holding the subtask folders,
// MME_Benchmark_release_version): for subtasks with an images/ folder the QA files are in
// <subtask>/questions_answers_YN/, otherwise next to the images; each line is
// "question<TAB>Yes|No" in <image basename up to the first '.'>.txt. Files are read on demand.
class MmeGroundTruth {
 public:
  explicit MmeGroundTruth(std::string root);
  // The gold answer, lowercased, or nullopt if the question is not in that file.
  std::optional<std::string> lookup(const std::string& subtask, const std::string& txt_name, const std::string& question);

 private:
  std::string root_;
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::string>> files_;
};

// The converter's rebuilt MME question: drop "Answer the question using a single word or
// phrase.", strip, and append " Please answer yes or no." unless it is already there.
std::string mme_question_from_prompt(const std::string& prompt);

// Joins every answer with the ground truth (question_id = "<subtask>/[images/]<file>"; the
// double-space " Please answer" variant is tried when the single-space one is absent) and scores.
// Answers whose question is not found count as unmatched; error records are skipped, and the images
// they belong to leave acc+.
MmeResult score_mme(const AnswerFile& answers, MmeGroundTruth& gt);

}  // namespace era::score
