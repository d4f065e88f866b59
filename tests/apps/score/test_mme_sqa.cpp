// MME (spec §4.6) and ScienceQA-IMG (§4.3): parsers, the hand-made test vectors, the MME ground
// truth lookup on a small release folder, and the problems.json reader.
#include <gtest/gtest.h>

#include <filesystem>

#include "apps/score/mme.h"
#include "apps/score/scienceqa.h"
#include "apps/score/score_test_util.h"
#include "test_support.h"

namespace era::score {
namespace {

using test_util::answer_line;
using test_util::answers_from;
using test_util::error_line;
using test_util::write_file;

TEST(MmeScore, ParseFollowsCalculationPy) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"Yes.", "yes"},
                                                                  {"yes, it is", "yes"},
                                                                  {"Eyes", "yes"},
                                                                  {"Not sure", "no"},
                                                                  {"None", "no"},
                                                                  {"nope", "no"},
                                                                  {"The answer is yes", "other"},
                                                                  {"Y", "other"},
                                                                  {"  yes", "other"},
                                                                  {"YES", "yes"},
                                                                  {"", "other"},
                                                                  {"No", "no"}};
  for (const auto& [in, want] : cases) EXPECT_EQ(mme_parse(in), want) << "\"" << in << "\"";
}

std::vector<MmeItem> pair(const std::string& subtask, const std::string& image, const std::string& gold1,
                          const std::string& pred1, const std::string& gold2, const std::string& pred2) {
  return {{subtask, image, gold1, pred1}, {subtask, image, gold2, pred2}};
}

TEST(MmeScore, ThreeImageTestVectorScores100) {
  std::vector<MmeItem> items;
  for (const auto& p :
       {pair("existence", "1.jpg", "yes", "Yes", "no", "No"), pair("existence", "2.jpg", "yes", "Yes", "no", "Yes"),
        pair("existence", "3.jpg", "yes", "The answer is yes", "no", "Not sure")})
    items.insert(items.end(), p.begin(), p.end());
  const MmeResult r = mme_scores(items);
  ASSERT_EQ(r.subtasks.size(), 1u);
  const auto& s = r.subtasks[0];
  EXPECT_EQ(s.correct, 4u);
  EXPECT_EQ(s.other, 1u);
  EXPECT_EQ(s.images_all_correct, 1u);
  EXPECT_NEAR(s.acc, 66.666666666666667, 1e-9);
  EXPECT_NEAR(s.acc_plus, 33.333333333333333, 1e-9);
  EXPECT_NEAR(s.score(), 100.0, 1e-9);
  EXPECT_NEAR(r.perception, 100.0, 1e-9);
  EXPECT_EQ(r.missing_subtasks.size(), 13u);
}

// A subtask of 10 images: `full` images with both answers right, `half` with one right, the rest
// with none. Its score is 20*full + 5*half.
std::vector<MmeItem> subtask_items(const std::string& name, int full, int half) {
  std::vector<MmeItem> items;
  for (int i = 0; i < 10; ++i) {
    const std::string img = name + "/" + std::to_string(i) + ".jpg";
    const bool first = i < full + half, second = i < full;
    auto p = pair(name, img, "yes", first ? "yes" : "no", "no", second ? "no" : "yes");
    items.insert(items.end(), p.begin(), p.end());
  }
  return items;
}

TEST(MmeScore, PerceptionIsTheSumOfTenSubtasks) {
  // Scores 150, 120, 100, 140, 130, 110, 160, 150, 120, 130 -> Perception 1310 (§4.6).
  const std::vector<std::pair<int, int>> fh = {{7, 2}, {6, 0}, {5, 0}, {7, 0}, {6, 2}, {5, 2}, {8, 0}, {7, 2}, {6, 0}, {6, 2}};
  const double want[] = {150, 120, 100, 140, 130, 110, 160, 150, 120, 130};
  std::vector<MmeItem> items;
  for (size_t i = 0; i < fh.size(); ++i) {
    const auto s = subtask_items(mme_perception_subtasks()[i], fh[i].first, fh[i].second);
    items.insert(items.end(), s.begin(), s.end());
  }
  const auto cog = subtask_items("code_reasoning", 10, 0);
  items.insert(items.end(), cog.begin(), cog.end());
  const auto odd = subtask_items("not_an_mme_subtask", 10, 0);
  items.insert(items.end(), odd.begin(), odd.end());
  const MmeResult r = mme_scores(items);
  ASSERT_EQ(r.subtasks.size(), 12u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.subtasks[i].name, mme_perception_subtasks()[i]);
    EXPECT_NEAR(r.subtasks[i].score(), want[i], 1e-9) << r.subtasks[i].name;
  }
  EXPECT_NEAR(r.perception, 1310.0, 1e-9);
  EXPECT_NEAR(r.cognition, 200.0, 1e-9);
  EXPECT_NEAR(r.total(), 1510.0, 1e-9);
  EXPECT_EQ(r.subtasks.back().name, "not_an_mme_subtask");  // listed, in no total
  EXPECT_EQ(r.missing_subtasks.size(), 3u);
}

TEST(MmeScore, AnErrorRecordTakesItsImageOutOfAccPlus) {
  std::vector<MmeItem> items = pair("color", "1.jpg", "yes", "yes", "no", "no");
  items.push_back({"color", "2.jpg", "yes", "yes"});
  items.push_back({"color", "2.jpg", "", "", true});
  const MmeResult r = mme_scores(items);
  EXPECT_EQ(r.subtasks[0].questions, 3u);
  EXPECT_EQ(r.subtasks[0].images, 1u);
  EXPECT_EQ(r.incomplete_images, 1u);
  EXPECT_NEAR(r.subtasks[0].score(), 200.0, 1e-9);
}

TEST(MmeScore, LooksUpTheReleaseGroundTruth) {
  const auto root = test::scratch_dir("score_mme_gt");
  std::filesystem::create_directories(root + "/artwork/images");
  std::filesystem::create_directories(root + "/artwork/questions_answers_YN");
  std::filesystem::create_directories(root + "/count");
  write_file(root + "/artwork/questions_answers_YN/14777.txt",
             "Is this artwork created by Bosch? Please answer yes or no.\tYes\n"
             "Is this artwork created by Dali?  Please answer yes or no.\tNo\n");
  write_file(root + "/count/000000006040.txt",
             "Are there two dogs in the image? Please answer yes or no.\tNo\r\n"
             "Is there one dog in the image? Please answer yes or no.\tYes\r\n\n");
  const std::string suffix = "\nAnswer the question using a single word or phrase.";
  const auto answers = answers_from(
      answer_line("artwork/images/14777.jpg", "Yes", "Is this artwork created by Bosch?" + suffix) +
      answer_line("artwork/images/14777.jpg", "Yes", "Is this artwork created by Dali?" + suffix) +  // double-space GT key
      answer_line("count/000000006040.jpg", "No", "Are there two dogs in the image?" + suffix) +
      error_line("count/000000006040.jpg") +
      answer_line("count/000000006040.jpg", "yes", "Is there a cat in the image?" + suffix));
  MmeGroundTruth gt(root);
  EXPECT_EQ(gt.lookup("count", "000000006040.txt", "Is there one dog in the image? Please answer yes or no."), "yes");
  EXPECT_EQ(mme_question_from_prompt("Is it red?" + suffix), "Is it red? Please answer yes or no.");
  const MmeResult r = score_mme(answers, gt);
  ASSERT_EQ(r.subtasks.size(), 2u);
  EXPECT_EQ(r.subtasks[0].name, "count");
  EXPECT_EQ(r.subtasks[0].questions, 1u);
  EXPECT_EQ(r.subtasks[0].images, 0u);  // its other question errored
  EXPECT_EQ(r.subtasks[1].name, "artwork");
  EXPECT_EQ(r.subtasks[1].questions, 2u);
  EXPECT_EQ(r.subtasks[1].correct, 1u);
  EXPECT_NEAR(r.subtasks[1].score(), 50.0, 1e-9);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_THROW(MmeGroundTruth(root + "/missing"), Error);
  write_file(root + "/count/1.txt", "no tab here\n");
  test::expect_invalid_argument([&] { gt.lookup("count", "1.txt", "x"); }, "expected question<TAB>Yes|No");
}

TEST(SqaScore, ParseTableOfSection4_3) {
  struct Case {
    std::string text;
    size_t choices;
    std::string letter;
    int index;
  };
  const std::vector<Case> cases = {
      {"A", 3, "A", 0},
      {"B. apostrophe", 2, "B", 1},
      {"The answer is C.", 4, "C", 2},
      {"The answer is B!", 2, "B", 1},
      {"E", 2, "E", -1},
      {"a", 2, "FAILED", -1},
      {"B.", 2, "FAILED", -1},
      {"(B)", 2, "FAILED", -1},
      {"Answer: B", 2, "FAILED", -1},
      {"The answer is A", 2, "FAILED", -1},
      {"The answer is A. The answer is B.", 2, "FAILED", -1},
      {"The answer is A\n", 2, "FAILED", -1},  // '.' does not match a newline
      {"Z", 2, "FAILED", -1},
      {"The answer is Z.", 4, "Z", -1},
  };
  for (const auto& c : cases) {
    const SqaParse p = sqa_parse(c.text, c.choices);
    EXPECT_EQ(p.letter, c.letter) << "\"" << c.text << "\"";
    EXPECT_EQ(p.index, c.index) << "\"" << c.text << "\"";
  }
}

TEST(ScienceQaScore, TestVectorImgIsHalfOverallThreeQuarters) {
  std::unordered_map<std::string, SqaProblem> problems = {
      {"q1", {1, 3, true}}, {"q2", {0, 2, true}}, {"q3", {2, 4, false}}, {"q4", {0, 2, false}}, {"q5", {0, 2, true}}};
  const std::string suffix = "\nAnswer with the option's letter from the given choices directly.";
  const auto answers =
      answers_from(answer_line("q1", "B", "<image>\nWhich?\nA. x\nB. y\nC. z" + suffix) +
                   answer_line("q2", "B.", "<image>\nWhich?\nA. x\nB. y" + suffix) +
                   answer_line("q3", "The answer is C.", "Which?\nA. a\nB. b\nC. c\nD. d" + suffix) +
                   answer_line("q4", "A", "Which?\nA. a\nB. b" + suffix) + error_line("q5") + answer_line("q404", "A", "x"));
  const SqaResult r = score_sqa(answers, problems);
  EXPECT_EQ(r.total, 4u);
  EXPECT_NEAR(r.accuracy, 75.0, 1e-12);
  EXPECT_EQ(r.img_total, 2u);
  EXPECT_NEAR(r.img_accuracy, 50.0, 1e-12);
  EXPECT_EQ(r.failed_parses, 1u);
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.missing, 1u);
}

TEST(ScienceQaScore, ReadsProblemsOfOneSplit) {
  const auto dir = test::scratch_dir("score_sqa_read");
  write_file(dir + "/problems.json", R"({
    "1": {"question": "Q", "choices": ["a", "b", "c"], "answer": 2, "hint": "", "image": "image.png", "split": "test",
          "lecture": "long text", "solution": "..."},
    "2": {"question": "Q", "choices": ["a", "b"], "answer": 0, "hint": "", "image": null, "split": "train"},
    "3": {"question": "Q", "choices": ["a", "b"], "answer": 1, "image": null, "split": "test"}})");
  const auto p = read_sqa_problems(dir + "/problems.json");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p.at("1").answer, 2);
  EXPECT_EQ(p.at("1").num_choices, 3u);
  EXPECT_TRUE(p.at("1").has_image);
  EXPECT_FALSE(p.at("3").has_image);
  EXPECT_EQ(read_sqa_problems(dir + "/problems.json", "train").size(), 1u);
  test::expect_invalid_argument([&] { read_sqa_problems(dir + "/problems.json", "val"); }, "no problems in split");
  write_file(dir + "/bad.json", R"({"1": {"choices": ["a"]}})");
  test::expect_invalid_argument([&] { read_sqa_problems(dir + "/bad.json"); }, "integer \"answer\"");
}

}  // namespace
}  // namespace era::score
