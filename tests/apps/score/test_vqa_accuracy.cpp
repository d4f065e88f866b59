// VQA accuracy (spec §3): the leave-one-out formula, test vectors T1-T4, TextVQA's prompt parsing
// and (image_id, question) join, and the VQAv2 val scorer / EvalAI upload.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/score/score_test_util.h"
#include "apps/score/vqa_accuracy.h"
#include "apps/score/vqa_normalize.h"
#include "test_support.h"

namespace era::score {
namespace {

using test_util::answer_line;
using test_util::answers_from;
using test_util::error_line;

std::vector<std::string> normalised(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& r : raw) out.push_back(vqa_normalize(r));
  return out;
}

const std::vector<std::string> kT2 = {"2", "2", "2", "3", "3", "3", "3", "3", "3", "3"};
const std::vector<std::string> kT3 = {"coca cola", "coca cola", "coca-cola", "Coca Cola",         "coke",
                                      "coke",      "coke",      "pepsi",     "coca cola company", "cola"};

TEST(VqaAccuracy, KMatchesGiveTheTableOfSection3) {
  const double want[] = {0.0, 0.3, 0.6, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  for (int k = 0; k <= 10; ++k) {
    std::vector<std::string> gt(10, "other");
    for (int i = 0; i < k; ++i) gt[i] = "x";
    EXPECT_NEAR(vqa_accuracy("x", gt), want[k], 1e-12) << "k = " << k;
    // the closed form [k*min(1,(k-1)/3) + (10-k)*min(1,k/3)] / 10
    const double closed = (k * std::min(1.0, (k - 1) / 3.0) + (10 - k) * std::min(1.0, k / 3.0)) / 10;
    EXPECT_NEAR(vqa_accuracy("x", gt), k == 0 ? 0.0 : closed, 1e-12);
  }
}

TEST(VqaAccuracy, TestVectorsT1ToT3) {
  EXPECT_DOUBLE_EQ(vqa_accuracy(vqa_normalize("Yes."), normalised(std::vector<std::string>(10, "yes"))), 1.0);  // T1
  const auto t2 = normalised(kT2);
  EXPECT_NEAR(vqa_accuracy(vqa_normalize("two"), t2), 0.9, 1e-12);
  EXPECT_DOUBLE_EQ(vqa_accuracy(vqa_normalize("3."), t2), 1.0);
  EXPECT_EQ(vqa_normalize("three dogs"), "3 dogs");
  EXPECT_DOUBLE_EQ(vqa_accuracy(vqa_normalize("three dogs"), t2), 0.0);

  const auto t3 = normalised(kT3);
  EXPECT_EQ(std::count(t3.begin(), t3.end(), "coca cola"), 4);
  EXPECT_EQ(std::count(t3.begin(), t3.end(), "coke"), 3);
  const std::vector<std::pair<std::string, double>> preds = {
      {"Coca-Cola.", 1.0}, {"Coke", 0.9}, {"Pepsi", 0.3}, {"cola", 0.3}, {"sprite", 0.0}};
  double sum = 0;
  for (const auto& [p, want] : preds) {
    const double acc = vqa_accuracy(vqa_normalize(p), t3);
    EXPECT_NEAR(acc, want, 1e-12) << p;
    sum += acc;
  }
  EXPECT_NEAR(sum / 5, 0.5, 1e-9);
}

TEST(VqaAccuracy, TextVqaPromptGivesTheLowercasedQuestion) {
  EXPECT_EQ(textvqa_question_from_prompt(
                "What brand is This?\nReference OCR token: Coke, 12\nAnswer the question using a single word or phrase."),
            "what brand is this?");
  EXPECT_EQ(
      textvqa_question_from_prompt("Reference OCR token: a\nWhat Is it?\nAnswer the question using a single word or phrase."),
      "what is it?");
  EXPECT_EQ(textvqa_question_from_prompt("Who?\nAnswer the question using a single word or phrase."), "who?");
  EXPECT_EQ(textvqa_question_from_prompt("OCR tokens: a b Question: What Is It? Short answer:"), "what is it?");
  EXPECT_THROW(textvqa_question_from_prompt("just one line"), Error);
  EXPECT_THROW(textvqa_question_from_prompt("a\nb\nc\nd"), Error);
}

std::string tv_prompt(const std::string& q) {
  return q + "\nReference OCR token: coke\nAnswer the question using a single word or phrase.";
}

TEST(VqaAccuracy, TextVqaT4JoinsOnImageAndQuestion) {
  // Two questions share image "img1" (question_id is the image id, not unique).
  std::vector<TextVqaAnnotation> ann = {{"img1", "What brand?", kT3},
                                        {"img1", "Which drink?", kT3},
                                        {"img2", "What brand?", kT3},
                                        {"img3", "What is sold?", kT3},
                                        {"img9", "Never asked?", kT3}};
  const auto answers = answers_from(
      answer_line("img1", "Coca-Cola.", tv_prompt("What brand?")) + answer_line("img1", "Coke", tv_prompt("WHICH drink?")) +
      error_line("img2") + answer_line("img2", "Pepsi", tv_prompt("What brand?")) +
      answer_line("img3", "sprite", tv_prompt("What is sold?")) + answer_line("img4", "x", tv_prompt("Unknown?")));
  const VqaResult r = score_textvqa(answers, ann);
  ASSERT_EQ(r.scored, 4u);
  EXPECT_NEAR(r.per_question[0], 1.0, 1e-12);
  EXPECT_NEAR(r.per_question[1], 0.9, 1e-12);
  EXPECT_NEAR(r.per_question[2], 0.3, 1e-12);
  EXPECT_NEAR(r.per_question[3], 0.0, 1e-12);
  EXPECT_NEAR(r.accuracy, 55.0, 1e-9);  // T4
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.missing, 1u);
}

TEST(VqaAccuracy, TextVqaNeedsTenAnswersAndPrompts) {
  std::vector<TextVqaAnnotation> ann = {{"img1", "Q?", {"a", "b"}}};
  EXPECT_THROW(score_textvqa(answers_from(answer_line("img1", "a", tv_prompt("Q?"))), ann), Error);
  ann[0].answers = kT3;
  test::expect_invalid_argument(
      [&] {
        score_textvqa(answers_from(R"({"question_id": "img1", "text": "a"})"
                                   "\n"),
                      ann);
      },
      "needs the prompt");
}

TEST(VqaAccuracy, VqaV2ScoresLikeTheServerOnLlavasUpload) {
  EXPECT_DOUBLE_EQ(vqav2_accuracy("Two", std::vector<std::string>(10, "2")), 1.0);
  EXPECT_NEAR(vqav2_accuracy("two", kT2), 0.9, 1e-12);
  // GT only gets process_punctuation: "coca-cola" becomes "coca cola", "Coca Cola" keeps its case.
  EXPECT_NEAR(vqav2_accuracy("Coca-Cola.", kT3), 0.9, 1e-12);
  // LLaVA uploads "man 's hat", the server keeps the GT "man's hat": no match (a real quirk).
  std::vector<std::string> hats(10, "man's hat");
  hats[9] = "hat";
  EXPECT_DOUBLE_EQ(vqav2_accuracy("man's hat", hats), 0.0);
  EXPECT_NEAR(vqav2_accuracy("hat", hats), 0.3, 1e-12);
}

TEST(VqaAccuracy, VqaV2ScorerKeysByQuestionAndSplitsAnswerTypes) {
  std::unordered_map<std::string, VqaV2Annotation> ann = {
      {"1", {std::vector<std::string>(10, "yes"), "yes/no"}},
      {"2", {kT2, "number"}},
      {"3", {std::vector<std::string>(10, "red"), "other"}},
  };
  const auto answers =
      answers_from(answer_line(1, "no") + answer_line(1, "Yes") + answer_line(2, "two") + error_line(3) + answer_line(77, "x"));
  const VqaResult r = score_vqav2(answers, ann);
  EXPECT_EQ(r.scored, 2u);
  EXPECT_EQ(r.duplicates, 1u);
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.missing, 1u);
  EXPECT_NEAR(r.accuracy, 95.0, 1e-9);
  ASSERT_EQ(r.by_type.size(), 2u);
  EXPECT_EQ(r.by_type[0].name, "number");
  EXPECT_NEAR(r.by_type[0].accuracy, 90.0, 1e-9);
  EXPECT_NEAR(r.by_type[1].accuracy, 100.0, 1e-9);
}

TEST(VqaAccuracy, VqaV2UploadListsEveryTestQuestion) {
  const auto dir = test::scratch_dir("score_vqav2_upload");
  const auto answers = answers_from(answer_line(5, "Two dogs") + error_line(6) + answer_line(7, "Yes."));
  const std::vector<std::string> all = {"4", "5", "6", "7"};
  write_vqav2_upload(dir + "/upload.json", answers, &all);
  const auto j = nlohmann::json::parse(test::read_file(dir + "/upload.json"));
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0], (nlohmann::json{{"question_id", 4}, {"answer", ""}}));
  EXPECT_EQ(j[1], (nlohmann::json{{"question_id", 5}, {"answer", "2 dogs"}}));
  EXPECT_EQ(j[2]["answer"], "");
  EXPECT_EQ(j[3]["answer"], "yes");
  write_vqav2_upload(dir + "/answered.json", answers);
  EXPECT_EQ(nlohmann::json::parse(test::read_file(dir + "/answered.json")).size(), 2u);
}

}  // namespace
}  // namespace era::score
