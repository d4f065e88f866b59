#include "apps/score/run_info.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/score/answers.h"
#include "era/error.h"

namespace era::score {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

struct RecordRun {
  std::string method;
  int64_t tokens = 0;
  double keep_ratio = 0;
  std::string describe() const { return "method " + method + " tokens " + std::to_string(tokens); }
  bool operator!=(const RecordRun& o) const { return method != o.method || tokens != o.tokens || keep_ratio != o.keep_ratio; }
};

}  // namespace

RunInfo parse_run_info(const std::string& jsonl, const std::string& name) {
  RunInfo info;
  RecordRun first;
  size_t first_line = 0;
  double sum = 0;
  std::istringstream in(jsonl);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      fail("answers " + name + " line " + std::to_string(number) + ": not valid JSON");
    }
    if (!j.is_object()) fail("answers " + name + " line " + std::to_string(number) + ": expected a JSON object");
    const auto meta = j.find("metadata");
    if (meta == j.end() || !meta->is_object()) continue;
    const auto method = meta->find("method");
    if (method == meta->end() || !method->is_string()) continue;  // an error record, or not era_eval's
    RecordRun run;
    run.method = method->get<std::string>();
    run.tokens = meta->value("tokens", int64_t{0});
    run.keep_ratio = meta->value("keep_ratio", 0.0);
    if (first_line == 0) {
      first = run;
      first_line = number;
    } else if (run != first) {
      fail("answers " + name + ": line " + std::to_string(first_line) + " is from " + first.describe() + " but line " +
           std::to_string(number) + " from " + run.describe() + ": score each run's answers file on its own");
    }
    const auto visual = meta->find("visual_tokens");
    if (visual != meta->end() && visual->is_number_integer() && !meta->contains("error")) {
      sum += visual->get<double>();
      ++info.visual_token_answers;
    }
  }
  if (first_line > 0) {
    info.method = first.method;
    info.tokens = first.tokens;
    info.keep_ratio = first.keep_ratio;
  }
  if (info.visual_token_answers > 0) info.visual_tokens_mean = sum / static_cast<double>(info.visual_token_answers);
  return info;
}

RunInfo read_run_info(const std::string& path) { return parse_run_info(read_text_file(path, "answers"), path); }

}  // namespace era::score
