#pragma once
// Joining the answers files of a sharded run (era_eval merge), the checked version of LLaVA's
// `cat chunk_*.jsonl > merge.jsonl`: every question line must appear exactly once over all inputs.
#include <cstdint>
#include <string>
#include <vector>

namespace era::eval {

struct MergeOptions {
  int64_t expected_questions = -1;  // from the question file; -1: lines 0..max must all be there
  bool drop_errors = false;         // leave error records out of the output
};

struct MergeSummary {
  int64_t records = 0;  // written
  int64_t answers = 0;
  int64_t errors = 0;  // error records found (written, or dropped with drop_errors)
};

// Reads `inputs` (chunk order), checks that no question line is duplicated or missing and that no
// input ends with an incomplete line, and writes the records ordered by question line (for
// chunk files that is their concatenation in chunk order) to `output`, atomically. The records
// are copied byte for byte. Throws era::Error(kInvalidArgument) naming the files and lines.
MergeSummary merge_answer_files(const std::vector<std::string>& inputs, const std::string& output,
                                const MergeOptions& options = {});

}  // namespace era::eval
