#pragma once
// Answer JSONL files (LLaVA's format, spec §1.2), one JSON object per line:
//   {"question_id": <int|string>, "prompt": str, "text": str, "answer_id": str, "model_id": str,
//    "metadata": {...}}
// MMBench records may add "round_id", "options" and "option_char" (ignored here: the TSV is the
// ground truth). Failed items are error records: `metadata.error` (or a top-level `error`) is set
// to anything but null/false/"". They keep their place in the list (POPE pairs answers with labels
// by position) but are flagged; every scorer skips them and reports how many there were.
//
// Blank lines are ignored. Anything else that is not such an object is an error naming the line.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace era::score {

struct Answer {
  std::string question_id;  // strings verbatim, integers in decimal (the join key of every scorer)
  bool question_id_is_number = false;
  std::string prompt;  // "" when absent (has_prompt tells)
  bool has_prompt = false;
  std::string text;
  std::string model_id;
  size_t line = 0;  // 1-based line number in the file
  bool is_error = false;
  std::string error;  // the error message of an error record
};

struct AnswerFile {
  std::string path;
  std::vector<Answer> records;  // file order, error records included
  size_t error_records() const;
  size_t answered() const { return records.size() - error_records(); }
  std::string model_id() const;  // the first non-empty model_id
};

AnswerFile read_answers(const std::string& path);
// The same from text (`name` stands for the file in messages).
AnswerFile parse_answers(const std::string& text, const std::string& name);

// The last answer of every question, as the official scripts' dicts keep it. Error records and
// answers that `known` rejects (no ground truth) are counted, not kept; a repeated question_id
// counts as a duplicate and replaces the earlier answer. `order` is first-seen order.
struct LatestAnswers {
  std::vector<std::string> order;
  std::map<std::string, const Answer*> by_id;
  size_t error_records = 0, unmatched = 0, duplicates = 0;
};
LatestAnswers latest_answers(const AnswerFile& answers, const std::function<bool(const Answer&)>& known);

// Reads a whole file; throws era::Error(kInvalidArgument) naming `what` and the path if it is
// missing or unreadable.
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace era::score
