// GQA exact match (spec §4.2) and POPE (§4.5): the test vectors, positional alignment per split,
// and the label/question readers.
#include <gtest/gtest.h>

#include "apps/score/gqa.h"
#include "apps/score/pope.h"
#include "apps/score/score_test_util.h"
#include "test_support.h"

namespace era::score {
namespace {

using test_util::answer_line;
using test_util::answers_from;
using test_util::error_line;
using test_util::write_file;

TEST(GqaScore, TestVectorIsHalfRight) {
  const std::vector<std::string> preds = {"Yes.", "left", "The man", "T-shirt", "no", "Yes!"};
  const std::vector<std::string> gold = {"yes", "left", "man", "t-shirt", "yes", "yes"};
  std::unordered_map<std::string, GqaQuestion> questions;
  std::string jsonl;
  for (size_t i = 0; i < preds.size(); ++i) {
    questions["20130725" + std::to_string(i)] = {gold[i], true, i < 3 ? "query" : "verify"};
    jsonl += answer_line("20130725" + std::to_string(i), preds[i]);
  }
  const GqaResult r = score_gqa(answers_from(jsonl), questions);
  EXPECT_EQ(r.scored, 6u);
  EXPECT_EQ(r.correct, 3u);  // ✓ ✓ ✗ ✓ ✗ ✗
  EXPECT_NEAR(r.accuracy, 50.0, 1e-12);
  ASSERT_EQ(r.by_structural.size(), 2u);
  EXPECT_EQ(r.by_structural[0].name, "query");
  EXPECT_EQ(r.by_structural[0].correct, 2u);
  EXPECT_EQ(r.by_structural[1].correct, 1u);
}

TEST(GqaScore, PredictionIsRstripDotThenLower) {
  EXPECT_EQ(gqa_prediction("Yes..."), "yes");
  EXPECT_EQ(gqa_prediction("A.B."), "a.b");
  EXPECT_EQ(gqa_prediction("Yes. "), "yes. ");  // only trailing periods go
  EXPECT_EQ(gqa_prediction("Yes!"), "yes!");
}

TEST(GqaScore, SkipsErrorsUnbalancedAndUnknownQuestions) {
  std::unordered_map<std::string, GqaQuestion> q = {
      {"1", {"yes", true, ""}}, {"2", {"no", false, ""}}, {"3", {"red", true, ""}}, {"4", {"cat", true, ""}}};
  const auto answers = answers_from(answer_line("1", "no") + answer_line("1", "Yes") + answer_line("2", "no") + error_line("3") +
                                    answer_line("99", "x") + "\n");
  const GqaResult r = score_gqa(answers, q);
  EXPECT_EQ(r.scored, 1u);
  EXPECT_EQ(r.correct, 1u);  // the last answer of question 1 counts
  EXPECT_EQ(r.duplicates, 1u);
  EXPECT_EQ(r.unbalanced, 1u);
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.missing, 2u);  // balanced 3 and 4
}

TEST(GqaScore, ReadsOnlyTheNeededFields) {
  const auto dir = test::scratch_dir("score_gqa_read");
  write_file(dir + "/q.json", R"({"201307251": {"answer": "yes", "isBalanced": true, "types": {"structural": "verify",
    "semantic": "attr"}, "semantic": [{"operation": "select", "argument": "x"}], "question": "Is it?"},
    "201307252": {"answer": "left", "isBalanced": false}})");
  const auto q = read_gqa_questions(dir + "/q.json");
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q.at("201307251").answer, "yes");
  EXPECT_EQ(q.at("201307251").structural, "verify");
  EXPECT_FALSE(q.at("201307252").balanced);
  write_file(dir + "/bad.json", R"([1, 2])");
  test::expect_invalid_argument([&] { read_gqa_questions(dir + "/bad.json"); }, "testdev_balanced_questions.json");
  test::expect_invalid_argument([&] { read_gqa_questions(dir + "/none.json"); }, "none.json: not found");
}

TEST(PopeScore, ParseKeepsTheFirstSentenceAndLooksForNo) {
  for (const char* yes : {"NO", "Nope", "No!", "I don't think so", "", "Yes", "Yes, there is a dog."})
    EXPECT_TRUE(pope_says_yes(yes)) << "\"" << yes << "\"";
  for (const char* no :
       {"No,", "No.", "There is a dog, not a cat.", "not sure", "The answer is no", "No", "no.", "There is no dog."})
    EXPECT_FALSE(pope_says_yes(no)) << "\"" << no << "\"";
}

TEST(PopeScore, TenItemTestVector) {
  const std::vector<std::string> preds = {"Yes", "Yes, there is a dog.", "No", "There is no dog.", "yes", "No", "Yes",
                                          "no.", "I don't think so",     "Yes"};
  std::vector<bool> parsed, labels;
  for (size_t i = 0; i < preds.size(); ++i) {
    parsed.push_back(pope_says_yes(preds[i]));
    labels.push_back(i < 5);
  }
  EXPECT_EQ(parsed, (std::vector<bool>{true, true, false, false, true, false, true, false, true, true}));
  const PopeMetrics m = pope_metrics(parsed, labels);
  EXPECT_EQ(m.tp, 3u);
  EXPECT_EQ(m.fn, 2u);
  EXPECT_EQ(m.fp, 3u);
  EXPECT_EQ(m.tn, 2u);
  EXPECT_NEAR(m.accuracy, 0.5, 1e-12);
  EXPECT_NEAR(m.precision, 0.5, 1e-12);
  EXPECT_NEAR(m.recall, 0.6, 1e-12);
  EXPECT_NEAR(m.f1, 6.0 / 11.0, 1e-12);
  EXPECT_NEAR(m.yes_ratio, 0.6, 1e-12);
}

TEST(PopeScore, DegenerateSplitsGiveZeroNotNan) {
  const PopeMetrics m = pope_metrics({false, false}, {true, false});
  EXPECT_EQ(m.precision, 0.0);
  EXPECT_EQ(m.f1, 0.0);
  EXPECT_NEAR(m.accuracy, 0.5, 1e-12);
}

TEST(PopeScore, SplitsArePairedByPositionAndF1IsAveraged) {
  // Split "random" is the 10-item vector; "popular" is all right; "adversarial" pairs by position
  // with an error record in the middle (its label is skipped, not shifted).
  std::unordered_map<std::string, std::string> cat;
  std::map<std::string, std::vector<bool>> labels;
  std::string jsonl;
  const std::vector<std::string> preds = {"Yes", "Yes, there is a dog.", "No", "There is no dog.", "yes", "No", "Yes",
                                          "no.", "I don't think so",     "Yes"};
  for (int i = 0; i < 10; ++i) {
    const std::string id = std::to_string(10000001 + i);
    cat[id] = "random";
    labels["random"].push_back(i < 5);
    jsonl += answer_line(std::stoll(id), preds[i]);
    const std::string pid = std::to_string(20000001 + i);
    cat[pid] = "popular";
    labels["popular"].push_back(i % 2 == 0);
    jsonl += answer_line(std::stoll(pid), i % 2 == 0 ? "Yes" : "No");
  }
  for (int i = 0; i < 3; ++i) cat[std::to_string(1 + i)] = "adversarial";
  labels["adversarial"] = {true, false, true};
  jsonl += answer_line(1, "Yes") + error_line(2) + answer_line(3, "No") + answer_line(424242, "Yes");
  const PopeResult r = score_pope(answers_from(jsonl), cat, labels);
  ASSERT_EQ(r.splits.size(), 3u);
  EXPECT_EQ(r.splits[0].name, "adversarial");
  EXPECT_EQ(r.splits[0].metrics.tp, 1u);
  EXPECT_EQ(r.splits[0].metrics.fn, 1u);  // "No" is paired with the third label (yes)
  EXPECT_EQ(r.splits[0].metrics.n(), 2u);
  EXPECT_EQ(r.splits[0].error_records, 1u);
  EXPECT_NEAR(r.splits[0].metrics.f1, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.splits[1].metrics.f1, 1.0, 1e-12);
  EXPECT_NEAR(r.splits[2].metrics.f1, 6.0 / 11.0, 1e-12);
  EXPECT_NEAR(r.mean_f1, (2.0 / 3.0 + 1.0 + 6.0 / 11.0) / 3.0, 1e-12);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.error_records(), 1u);
}

TEST(PopeScore, ReadsLabelFoldersAndQuestionCategories) {
  const auto dir = test::scratch_dir("score_pope_read");
  std::filesystem::create_directories(dir + "/labels");
  write_file(dir + "/labels/coco_pope_random.json",
             "{\"question_id\": 1, \"image\": \"a.jpg\", \"text\": \"Is there a dog?\", \"label\": \"yes\"}\n"
             "{\"question_id\": 2, \"image\": \"a.jpg\", \"text\": \"Is there a cat?\", \"label\": \"no\"}\n");
  write_file(dir + "/labels/coco_pope_popular.json", "{\"label\": \"no\"}\n");
  write_file(dir + "/labels/README.txt", "not a label file");
  const auto labels = read_pope_labels(dir + "/labels");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels.at("random"), (std::vector<bool>{true, false}));
  EXPECT_EQ(read_pope_labels(dir + "/labels/coco_pope_popular.json").at("popular"), std::vector<bool>{false});
  write_file(dir + "/q.jsonl",
             "{\"question_id\": 1, \"image\": \"a.jpg\", \"text\": \"t\", \"category\": \"random\"}\n"
             "{\"question_id\": 20000001, \"category\": \"popular\"}\n");
  const auto cat = read_question_categories(dir + "/q.jsonl");
  EXPECT_EQ(cat.at("1"), "random");
  EXPECT_EQ(cat.at("20000001"), "popular");
  test::expect_invalid_argument([&] { read_pope_labels(dir + "/q.jsonl"); }, "coco_pope_<split>.json");
  test::expect_invalid_argument([&] { read_pope_labels(dir + "/nothing"); }, "no such file");
  write_file(dir + "/labels/coco_pope_adversarial.json", "{\"label\": \"no\"\n");
  test::expect_invalid_argument([&] { read_pope_labels(dir + "/labels"); }, "line 1: not valid JSON");
}

}  // namespace
}  // namespace era::score
