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
// Annotation files: a JSON list of rows, or JSON Lines (one row per line); the question id of the
// answers is the row's question_id (videomme) or id (longvideobench).
#include <cstddef>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "eval/score/answers.h"

namespace era::score {

enum class VideoChoiceBenchmark { kVideoMme, kLongVideoBench };

// The letter the benchmark's parser reads in `answer` ("" when none).
std::string video_choice_letter(const std::string& answer, VideoChoiceBenchmark benchmark);

struct VideoChoiceQuestion {
  std::string answer;                                      // the correct letter
  std::vector<std::pair<std::string, std::string>> groups;  // (group kind, value), e.g. (duration, short)
};
std::unordered_map<std::string, VideoChoiceQuestion> read_video_choice_annotations(const std::string& path,
                                                                                  VideoChoiceBenchmark benchmark);

struct VideoChoiceResult {
  size_t total = 0, correct = 0, unparsed = 0;
  double accuracy = 0;  // %
  size_t error_records = 0, unmatched = 0, duplicates = 0, missing = 0;
  // "kind: value" -> (answered, correct), sorted by key.
  std::map<std::string, std::pair<size_t, size_t>> by_group;
};
VideoChoiceResult score_video_choice(const AnswerFile& answers,
                                     const std::unordered_map<std::string, VideoChoiceQuestion>& questions,
                                     VideoChoiceBenchmark benchmark);

}  // namespace era::score
