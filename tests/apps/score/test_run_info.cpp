// The run behind an answers file, as era_score stores it for `era_score compare`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/score/run_info.h"
#include "test_support.h"

namespace era::score {
namespace {

TEST(RunInfo, TheRecordsMethodBudgetAndMeanVisualTokens) {
  const auto line = [](int id, const std::string& method, int tokens, int visual) {
    return nlohmann::json{{"question_id", id},
                          {"text", "t"},
                          {"metadata", {{"method", method}, {"tokens", tokens}, {"visual_tokens", visual}}}}
               .dump() +
           "\n";
  };
  const std::string error = R"({"question_id": 9, "line": 3, "error": "image error", "metadata": {"line": 3, "error": "x"}})"
                            "\n";
  const RunInfo info = parse_run_info(line(1, "era", 64, 60) + line(2, "era", 64, 70) + error, "a.jsonl");
  EXPECT_EQ(info.method, "era");
  EXPECT_EQ(info.tokens, 64);
  EXPECT_EQ(info.visual_token_answers, 2u);  // the error record has no count
  EXPECT_DOUBLE_EQ(info.visual_tokens_mean, 65.0);
  // LLaVA's own answers say nothing about a run.
  const RunInfo none = parse_run_info(R"({"question_id": 1, "text": "t", "metadata": {}})"
                                      "\n",
                                      "a.jsonl");
  EXPECT_TRUE(none.method.empty());
  EXPECT_EQ(none.visual_token_answers, 0u);
  test::expect_invalid_argument([&] { parse_run_info(line(1, "era", 64, 64) + line(2, "era", 128, 128), "a.jsonl"); },
                                "score each run's answers file on its own");
}

}  // namespace
}  // namespace era::score
