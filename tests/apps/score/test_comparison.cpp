// The side-by-side comparison table: grouping by budget under the upper bound, Avg. (%) from the
// retention ratios and the mean real visual tokens.
#include <gtest/gtest.h>

#include "apps/score/comparison.h"
#include "test_support.h"

namespace era::score {
namespace {

MethodScores run(const std::string& method, int64_t tokens, std::map<std::string, double> scores,
                 std::map<std::string, VisualTokenCount> visual = {}) {
  MethodScores m;
  m.name = method;
  m.path = method + "_" + std::to_string(tokens) + ".json";
  m.scores = std::move(scores);
  m.reduction = Reduction{method, tokens, 0};
  m.visual_tokens = std::move(visual);
  return m;
}

TEST(Comparison, TokenColumnIsTheMeanRealCountOverAllAnswers) {
  const MethodScores full = run("full", 0, {{"gqa", 60}, {"pope", 80}}, {{"gqa", {576, 10}}, {"pope", {576, 30}}});
  // 3 GQA answers at 10 tokens on average and 1 POPE answer at 30: 60 / 4 = 15, not (10 + 30) / 2.
  const MethodScores a = run("a", 16, {{"gqa", 30}, {"pope", 80}}, {{"gqa", {10, 3}}, {"pope", {30, 1}}});
  const MethodScores b = run("b", 16, {{"gqa", 45}}, {});
  const ComparisonTable t = compare_runs(full, {a, b});
  ASSERT_EQ(t.visual_tokens.size(), 2u);
  EXPECT_DOUBLE_EQ(*t.visual_tokens[0], 15.0);
  EXPECT_FALSE(t.visual_tokens[1].has_value());  // results without counts: "-", never a made-up number
  EXPECT_DOUBLE_EQ(*t.reference_visual_tokens, 576.0);
  // Only the table's benchmarks count: with GQA alone, a's mean is GQA's.
  EXPECT_DOUBLE_EQ(*compare_runs(full, {a}, {"gqa"}).visual_tokens[0], 10.0);
  // Avg. is retention's: (30/60 + 80/80) / 2 = 75%; b has GQA only: 75%.
  EXPECT_DOUBLE_EQ(*t.retention.rows[0].average, 75.0);
  EXPECT_DOUBLE_EQ(*t.retention.rows[1].average, 75.0);
  EXPECT_EQ(t.retention.rows[1].used, 1u);
}

// A benchmark the full model scored 0 on (a broken run) has no ratio: it is shown and left out of
// Avg. (%) with a note, and the rest of the table stands (it used to abort the whole table).
TEST(Comparison, AZeroReferenceScoreIsLeftOutOfTheAverageNotFatal) {
  const MethodScores full = run("full", 0, {{"gqa", 60}, {"pope", 0}});
  const MethodScores a = run("a", 16, {{"gqa", 30}, {"pope", 40}});
  const ComparisonTable t = compare_runs(full, {a});
  EXPECT_EQ(t.retention.zero_reference, (std::vector<std::string>{"pope"}));
  EXPECT_DOUBLE_EQ(*t.retention.rows[0].average, 50.0);  // GQA alone: 30 / 60
  EXPECT_EQ(t.retention.rows[0].used, 1u);
  EXPECT_FALSE(t.retention.rows[0].relative[1].has_value());
  const std::string md = comparison_markdown(t);
  EXPECT_NE(md.find("50.0%"), std::string::npos) << md;
  EXPECT_EQ(md.find("50.0%*"), std::string::npos) << "not a partial run: " << md;
  EXPECT_NE(md.find("Left out of Avg. (%): pope"), std::string::npos) << md;
  EXPECT_NE(comparison_json(t).find("\"left_out_of_avg\""), std::string::npos);
  // With every reference score 0 there is no table to make.
  test::expect_invalid_argument([&] { compare_runs(run("full", 0, {{"gqa", 0}}), {a}); }, "every benchmark score is 0");
}

TEST(Comparison, GroupsByBudgetLargestFirstKeepingTheGivenOrder) {
  const MethodScores full = run("full", 0, {{"gqa", 50}}, {{"gqa", {576, 1}}});
  const ComparisonTable t =
      compare_runs(full, {run("x", 64, {{"gqa", 40}}), run("y", 128, {{"gqa", 45}}), run("z", 64, {{"gqa", 42}})});
  ASSERT_EQ(t.groups.size(), 3u);
  EXPECT_EQ(t.groups[0].title, "Upper bound: 576 tokens (100%)");
  EXPECT_FALSE(t.groups[0].budget.has_value());
  EXPECT_EQ(t.groups[1].title, "Retain 128 tokens (\xE2\x86\x93 77.8%)");
  EXPECT_EQ(t.groups[1].rows, (std::vector<size_t>{1}));
  EXPECT_EQ(t.groups[2].title, "Retain 64 tokens (\xE2\x86\x93 88.9%)");
  EXPECT_EQ(t.groups[2].rows, (std::vector<size_t>{0, 2}));
}

TEST(Comparison, FindsTheFullRunAndRefusesRunsWithoutABudget) {
  const std::vector<MethodScores> runs = {run("era", 64, {{"gqa", 1}}), run("full", 0, {{"gqa", 2}})};
  EXPECT_EQ(find_reference(runs), 1u);
  test::expect_invalid_argument([&] { find_reference({runs[0]}); }, "--reference");
  test::expect_invalid_argument([&] { find_reference({runs[1], runs[1]}); }, "several results files");
  MethodScores hand;
  hand.name = "hand";
  hand.path = "hand.json";
  hand.scores = {{"gqa", 1}};
  test::expect_invalid_argument([&] { compare_runs(runs[1], {hand}); }, "hand.json does not say which run");
}

}  // namespace
}  // namespace era::score
