#pragma once
// VQA accuracy (spec §3) and the two benchmarks scored with it: TextVQA (§4.4, LLaVA's
// eval_textvqa.py / m4c TextVQAAccuracyEvaluator) and VQAv2 on val (§4.1 local proxy; test-dev is
// scored by the EvalAI server, for which `write_vqav2_upload` writes the submission file).
#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

// acc = (1/n) * sum_i min(1, #{j != i : gt[j] == pred} / 3): the average over the n leave-one-out
// subsets (10 choose 9 for the usual 10 answers). Inputs are compared as given (normalise first).
// Empty `gt` gives 0.
double vqa_accuracy(const std::string& pred, const std::vector<std::string>& gt);

struct VqaTypeScore {
  std::string name;
  size_t questions = 0;
  double accuracy = 0;  // %
};

struct VqaResult {
  double accuracy = 0;                // % over scored questions
  size_t scored = 0;                  // answers joined with an annotation and scored
  size_t error_records = 0;           // skipped error records
  size_t unmatched = 0;               // answers whose question is not in the annotations (skipped)
  size_t duplicates = 0;              // answers for a question already answered (the last one counts)
  size_t missing = 0;                 // annotated questions without an answer (not scored)
  std::vector<double> per_question;   // in scoring order
  std::vector<VqaTypeScore> by_type;  // VQAv2 answer_type (yes/no, number, other), sorted by name
  size_t ocr_prompts = 0;             // TextVQA: scored answers whose prompt carries OCR tokens
};

// ---- TextVQA ---------------------------------------------------------------------------------
struct TextVqaAnnotation {
  std::string image_id, question;
  std::vector<std::string> answers;  // the 10 raw human answers
};
// TextVQA_0.5.1_val.json: {"data": [{"image_id", "question", "answers": [10 strings]}, ...]}.
std::vector<TextVqaAnnotation> read_textvqa_annotations(const std::string& path);
// LLaVA's prompt_processor: the question inside an answer's `prompt`, lowercased. Handles the
// "OCR tokens: ... Question: Q Short answer:" form, the 3-line "Reference OCR token:" form (either
// order) and the 2-line form; anything else throws.
std::string textvqa_question_from_prompt(const std::string& prompt);
// Joins each answer with the annotation on (question_id = image_id, question.lower()) and scores
// normalize(pred) against the 10 normalised answers (each annotation must have exactly 10).
VqaResult score_textvqa(const AnswerFile& answers, const std::vector<TextVqaAnnotation>& annotations);

// ---- VQAv2 (val) -----------------------------------------------------------------------------
struct VqaV2Annotation {
  std::vector<std::string> answers;  // the 10 human answers
  std::string answer_type;
};
// v2_mscoco_val2014_annotations.json: {"annotations": [{"question_id", "answer_type",
// "answers": [{"answer": ...}, ...]}, ...]} (other fields are not read).
std::unordered_map<std::string, VqaV2Annotation> read_vqav2_annotations(const std::string& path);
// The accuracy of one prediction as the VQA server (vqaEval.py, latest) scores LLaVA's upload:
// pred' = normalize(pred) (what LLaVA uploads), then the server's whitespace cleanup,
// process_punctuation and process_digit_article; the GT answers go through process_punctuation
// only, and only when the 10 answers are not all identical (spec §2.3).
double vqav2_accuracy(const std::string& prediction, const std::vector<std::string>& gt);
// Keyed by question_id; duplicate answers: the last counts (a dict, as in the converter).
VqaResult score_vqav2(const AnswerFile& answers, const std::unordered_map<std::string, VqaV2Annotation>& annotations);

// The EvalAI upload (convert_vqav2_for_submission.py): a JSON array of
// {"question_id": int, "answer": normalize(text)}. With `all_question_ids` (the full test2015
// question list, in its order) every one of them is listed and unanswered ones get "";
// otherwise the answered questions are listed in answer order. Error records count as unanswered.
void write_vqav2_upload(const std::string& path, const AnswerFile& answers,
                        const std::vector<std::string>* all_question_ids = nullptr);
// question_id of every line of a question JSONL (e.g. llava_vqav2_mscoco_test2015.jsonl), in order.
std::vector<std::string> read_question_ids(const std::string& path);

}  // namespace era::score
