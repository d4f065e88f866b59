#pragma once
// Video multiple-choice benchmarks as lmms-eval scores them: the option letter is pulled out of
// the answer text and compared with the annotation's letter; accuracy overall and per group.
//
//   videomme        Video-MME (lmms-eval tasks/videomme): letters A-D. The answer is stripped,
//                   lmms-eval's prefixes are removed (its list, including the two entries that
//                   Python's implicit string concatenation fused: "The best option isThe correct
//                   option is" and "Best answer:Best option:"), an answer of more than ten words
//                   without any of A-D gives no letter, else the first A-D anywhere in it.
//                   Groups: duration, domain, task_type. Annotations: the dataset's rows
//                   (question_id, answer, duration, domain, sub_category, task_type).
//   longvideobench  LongVideoBench (lmms-eval tasks/longvideobench): letters A-E, the eight
//                   prefixes as written, the same rules; the answer letter is correct_choice
//                   (0 -> A). lmms-eval picks a random letter when none is found; era counts it
//                   wrong and reports how many (`unparsed`), so a run scores the same every time
//                   (the expected difference is unparsed / number of options, in questions).
//                   Groups: duration_group, question_category. Annotations: lvb_val.json rows
//                   (id, correct_choice, duration_group, question_category).
//   mvbench         MVBench (lmms-eval tasks/mvbench utils.py, mcq_acc): the stripped answer
//                   "X. text" (X one of A-E, any case, ".", optional whitespace, then at least one
//                   character and no newline) gives X. Otherwise newlines and tabs become spaces,
//                   the text is stripped, its punctuation cleaned as mcq_acc's processPunctuation
//                   does (; / [ ] " { } ( ) = + \ _ - > < @ ` , ? ! each deleted when the text
//                   has it next to a space or has a digit,digit anywhere, else made a space; then
//                   the first 32 "." not followed by a digit deleted: the 32 is re.UNICODE passed
//                   as sub()'s count), ' " ) ( stripped from the ends, lowercased, and the first
//                   A-E standing alone is the letter (Python re's \b over Unicode word characters,
//                   see py_isword_re: the article in "a dog" reads as A; a letter right after a
//                   CJK character does not stand alone). Without one, lmms-eval keeps the cleaned
//                   text, which never equals a letter A-E: counted wrong and `unparsed` (lmms-eval
//                   draws nothing at random here). The annotation's letter goes through the same
//                   function (a letter after E becomes its lowercase text, so such an answer is
//                   right only if it cleans to exactly that; py_lower's documented limits touch
//                   only this case). An answer whose text is exactly "" is left out of the
//                   accuracy and counted (`empty`), as mvbench_aggregate_results leaves it out
//                   (error records are skipped before, as for every benchmark). Group: task
//                   (lmms-eval scores each of the 20 tasks; its mvbench group has no
//                   aggregate_metric_list, so it prints no overall number). The headline here is
//                   all answered questions pooled, as for the others; MVBench has 200 questions a
//                   task, so on a full run that is also the mean of the 20 task accuracies.
//                   Annotations: rows {question_id, task, answer, candidates (optional)}, see
//                   read_video_choice_annotations.
// Annotation files: a JSON list of rows, or JSON Lines (one row per line); the question id of the
// answers is the row's question_id (videomme, mvbench) or id (longvideobench).
#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

enum class VideoChoiceBenchmark { kVideoMme, kLongVideoBench, kMvBench };

// The letter the benchmark's parser reads in `answer` ("" when none; MVBench: A-E only).
std::string video_choice_letter(const std::string& answer, VideoChoiceBenchmark benchmark);

struct VideoChoiceQuestion {
  std::string answer;                                       // the correct letter
  std::vector<std::pair<std::string, std::string>> groups;  // (group kind, value), e.g. (duration, short)
};
// MVBench rows: "question_id" (string or integer: the id the answers carry; MVBench's json files
// have none, so it is whatever the question file gave each row), "task" (the group: lmms-eval's
// task name, e.g. action_sequence), "answer" and optionally "candidates" (the option texts in
// order, as MVBench's json gives them). The letter: the first candidate equal to "answer" (as
// lmms-eval finds it; A = the first candidate), else "answer" is a letter ("B") or the option as
// lmms-eval's prompt shows it ("(B) option text", whose text must then be that candidate's). With
// candidates the letter must name one of them (26 at most); without them it must be A-E.
std::unordered_map<std::string, VideoChoiceQuestion> read_video_choice_annotations(const std::string& path,
                                                                                   VideoChoiceBenchmark benchmark);

struct VideoChoiceResult {
  size_t total = 0, correct = 0, unparsed = 0;
  size_t empty = 0;     // MVBench: answers whose text is "", left out of total (as lmms-eval does)
  double accuracy = 0;  // %
  size_t error_records = 0, unmatched = 0, duplicates = 0, missing = 0;
  // "kind: value" -> (answered, correct), sorted by key.
  std::map<std::string, std::pair<size_t, size_t>> by_group;
};
VideoChoiceResult score_video_choice(const AnswerFile& answers,
                                     const std::unordered_map<std::string, VideoChoiceQuestion>& questions,
                                     VideoChoiceBenchmark benchmark);

}  // namespace era::score
