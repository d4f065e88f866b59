#pragma once
// MMBench dev (EN or CN) with circular evaluation (spec §4.7). The TSV already holds the circular
// copies: row index g + k*1,000,000 is the k-th rotation of question g, with its own answer
// letter. A question (group) counts as correct only if every one of its rows is answered with the
// right letter. Letters are extracted as VLMEvalKit's exact-matching mode does (no GPT judge).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "apps/score/answers.h"

namespace era::score {

// A TSV read as pandas.read_table does by default: tab-separated, first line = header, '"' quotes
// fields (which may then hold tabs and newlines; "" is a quote), blank lines skipped. Columns named
// in `drop_columns` are kept as empty strings (MMBench's base64 images need not sit in memory).
struct Tsv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int column(const std::string& name) const;  // -1 if absent
};
Tsv parse_tsv(const std::string& text, const std::set<std::string>& drop_columns = {});

struct MmbRow {
  int64_t index = 0;
  std::string answer;                // the correct letter of this row
  std::vector<std::string> options;  // A, B, ... up to the first empty/NaN/"none" one
  std::string category, l2_category;
  int64_t group() const { return index % 1000000; }
};
// mmbench_dev_*.tsv (index, question, hint, A, B, C, D, answer, category, l2-category, ...). The
// base64 image column is not kept. Throws if there is no answer column (the test split).
std::vector<MmbRow> read_mmbench_tsv(const std::string& path);

// The letter an answer gives, or nullopt (counts as wrong):
//  - 'Z' for VLMEvalKit's refusal phrases;
//  - replace each of . ( ) [ ] , : ; ! * # { } by a space and split on whitespace; if exactly one
//    option letter is a token and its first position is > #tokens - 5: that letter;
//  - else, no letter token but a "Z" token: 'Z';
//  - else "answer is X" (the phrase case-insensitive, X an uppercase option letter, optionally
//    after "(", not followed by a letter or digit): X;
//  - else, if the answer is at most twice the total option length (code points) and exactly one
//    option text occurs in it (case-insensitive): that option's letter.
std::optional<char> mmbench_extract(const std::string& prediction, const std::vector<std::string>& options);

struct MmbCategory {
  std::string name;
  size_t groups = 0, correct = 0;
  double accuracy = 0;  // %
};

struct MmbResult {
  size_t groups = 0, correct_groups = 0;               // complete groups (every row answered) and the correct ones
  double circular_accuracy = 0;                        // %, the MMBench score
  size_t incomplete_groups = 0;                        // some row without an answer (or an error record): not scored
  size_t first_pass_rows = 0, first_pass_correct = 0;  // k = 0 rows answered (vanilla single pass)
  double first_pass_accuracy = 0;                      // %
  size_t error_records = 0, unmatched = 0, duplicates = 0, unparsed = 0;  // unparsed: answered rows with no letter
  std::vector<MmbCategory> by_category;  // sorted by name (a group's category is its k = 0 row's)
};

// Joins answers with rows on question_id = index (the last answer of a row counts).
MmbResult score_mmbench(const AnswerFile& answers, const std::vector<MmbRow>& rows);

}  // namespace era::score
