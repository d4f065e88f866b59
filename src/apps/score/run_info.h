#pragma once
// The era_eval run behind an answers file: the reduction method and nominal budget every record
// carries in its metadata, and the mean number of visual tokens the decoder really saw. LLaVA's
// own answers carry none of it (then `method` is empty).
#include <cstddef>
#include <cstdint>
#include <string>

namespace era::score {

struct RunInfo {
  std::string method;               // metadata.method; "" when the answers do not say
  int64_t tokens = 0;               // metadata.tokens: the nominal budget (0 = none)
  double keep_ratio = 0;            // metadata.keep_ratio, when the run used one
  size_t visual_token_answers = 0;  // answers (not error records) carrying metadata.visual_tokens
  double visual_tokens_mean = 0;    // their mean
};

// Reads it from an answers JSONL (`name` stands for the file in messages). Throws
// era::Error(kInvalidArgument) when the records name different methods or budgets (answers of
// several runs mixed in one file) or a line is not a JSON object.
RunInfo parse_run_info(const std::string& jsonl, const std::string& name);
RunInfo read_run_info(const std::string& path);

}  // namespace era::score
