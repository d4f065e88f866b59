// era_score end to end on small files: each benchmark prints its table and stores its score in a
// results JSON, `retention` turns those files into Avg. (%), and every bad input gives one
// "era_score: error:" line and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/score/score_test_util.h"
#include "test_support.h"

namespace era {
namespace {

using nlohmann::json;
using score::test_util::answer_line;
using score::test_util::error_line;
using score::test_util::write_file;

test::CommandResult score(const std::string& args) { return test::run_command(test::era_score_path() + " " + args); }

void expect_score_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("era_score: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

using test::read_json;

// GQA's test vector (50%) as files.
void write_gqa(const std::string& dir) {
  const std::vector<std::string> preds = {"Yes.", "left", "The man", "T-shirt", "no", "Yes!"};
  const std::vector<std::string> gold = {"yes", "left", "man", "t-shirt", "yes", "yes"};
  json q = json::object();
  std::string jsonl;
  for (size_t i = 0; i < preds.size(); ++i) {
    const std::string id = "2013072" + std::to_string(i);
    q[id] = {{"answer", gold[i]}, {"isBalanced", true}, {"types", {{"structural", "query"}}}};
    jsonl += answer_line(id, preds[i]);
  }
  write_file(dir + "/gqa_questions.json", q.dump());
  write_file(dir + "/gqa.jsonl", jsonl + error_line("2013079"));
}

TEST(EraScoreCli, GqaPrintsTheTableAndWritesResults) {
  const auto dir = test::scratch_dir("era_score_gqa");
  write_gqa(dir);
  const auto r = score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/gqa_questions.json --json " +
                       dir + "/era.json --method era-64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  50.00  accuracy (%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 error record(s) skipped"), std::string::npos) << r.out;
  const json j = read_json(dir + "/era.json");
  EXPECT_EQ(j["method"], "era-64");
  EXPECT_DOUBLE_EQ(j["benchmarks"]["gqa"]["score"].get<double>(), 50.0);
  EXPECT_EQ(j["benchmarks"]["gqa"]["counts"]["error_records"], 1);
  EXPECT_EQ(j["benchmarks"]["gqa"]["model_id"], "tiny-test");
  EXPECT_EQ(j["benchmarks"]["gqa"]["breakdown"]["structural"][0]["questions"], 6);
}

TEST(EraScoreCli, VideoMultipleChoiceScoresLettersAndWritesResults) {
  const auto dir = test::scratch_dir("era_score_video");
  write_file(dir + "/videomme.jsonl", R"({"question_id": "001-1", "answer": "A", "duration": "short"})"
                                      "\n"
                                      R"({"question_id": "001-2", "answer": "C", "duration": "short"})"
                                      "\n"
                                      R"({"question_id": "002-1", "answer": "D", "duration": "long"})"
                                      "\n"
                                      R"({"question_id": "002-2", "answer": "B", "duration": "long"})"
                                      "\n");
  write_file(dir + "/answers.jsonl", answer_line("001-1", "A") + answer_line("001-2", "The answer is (C).") +
                                         answer_line("002-1", "B") + answer_line("002-2", "no idea at all"));
  const auto r = score("--benchmark videomme --answers " + dir + "/answers.jsonl --annotations " + dir +
                       "/videomme.jsonl --json " + dir + "/full.json --method full");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  50.00  accuracy (%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 answer(s) gave no option letter"), std::string::npos) << r.out;
  const json j = read_json(dir + "/full.json");
  EXPECT_DOUBLE_EQ(j["benchmarks"]["videomme"]["score"].get<double>(), 50.0);
  EXPECT_EQ(j["benchmarks"]["videomme"]["counts"]["unparsed"], 1);

  // A bad annotation row stops with the row and the field named.
  write_file(dir + "/bad.jsonl", R"({"question_id": "001-1", "answer": "Z"})"
                                 "\n");
  expect_score_error(score("--benchmark videomme --answers " + dir + "/answers.jsonl --annotations " + dir + "/bad.jsonl"),
                     "row 1: \"answer\" must be one of A, B, C, D");
}

TEST(EraScoreCli, MvBenchScoresLettersPerTaskAndWritesResults) {
  const auto dir = test::scratch_dir("era_score_mvbench");
  write_file(dir + "/mvbench.jsonl",
             R"({"question_id": "as_0", "task": "action_sequence", "candidates": ["sit", "stand"], "answer": "stand"})"
             "\n"
             R"({"question_id": "as_1", "task": "action_sequence", "candidates": ["sit", "stand"], "answer": "sit"})"
             "\n"
             R"({"question_id": "oe_0", "task": "object_existence", "answer": "(C) three"})"
             "\n"
             R"({"question_id": "oe_1", "task": "object_existence", "answer": "A"})"
             "\n"
             R"({"question_id": "oe_2", "task": "object_existence", "answer": "A"})"
             "\n");
  // Right, right ("a. sit" reads as A), wrong ("E" is not C), unparsed; the empty answer is left out.
  write_file(dir + "/answers.jsonl", answer_line("as_0", "(B) stand") + answer_line("as_1", "a. sit") + answer_line("oe_0", "E") +
                                         answer_line("oe_1", "no idea") + answer_line("oe_2", ""));
  const auto r = score("--benchmark mvbench --answers " + dir + "/answers.jsonl --annotations " + dir + "/mvbench.jsonl --json " +
                       dir + "/full.json --method full");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  50.00  accuracy (%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 answer(s) gave no option letter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 empty answer(s) left out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("task: object_existence"), std::string::npos) << r.out;
  const json j = read_json(dir + "/full.json");
  EXPECT_DOUBLE_EQ(j["benchmarks"]["mvbench"]["score"].get<double>(), 50.0);
  EXPECT_EQ(j["benchmarks"]["mvbench"]["counts"]["total"], 4);
  EXPECT_EQ(j["benchmarks"]["mvbench"]["counts"]["unparsed"], 1);
  EXPECT_EQ(j["benchmarks"]["mvbench"]["counts"]["empty"], 1);

  // An answer that is none of the candidates stops with the row named.
  write_file(dir + "/bad.jsonl", R"({"question_id": "as_0", "task": "action_sequence", "candidates": ["sit"], "answer": "run"})"
                                 "\n");
  expect_score_error(score("--benchmark mvbench --answers " + dir + "/answers.jsonl --annotations " + dir + "/bad.jsonl"),
                     "row 1: \"answer\" \"run\" is not one of the \"candidates\"");
}

TEST(EraScoreCli, PopeReportsEachSplitAndTheMeanF1) {
  const auto dir = test::scratch_dir("era_score_pope");
  std::filesystem::create_directories(dir + "/labels");
  const std::vector<std::string> preds = {"Yes", "Yes, there is a dog.", "No", "There is no dog.", "yes", "No", "Yes",
                                          "no.", "I don't think so",     "Yes"};
  std::string labels, questions, answers;
  for (int i = 0; i < 10; ++i) {
    labels += json{{"question_id", i + 1}, {"label", i < 5 ? "yes" : "no"}}.dump() + "\n";
    questions += json{{"question_id", 10000001 + i}, {"image", "x.jpg"}, {"text", "t"}, {"category", "random"}}.dump() + "\n";
    answers += answer_line(10000001 + i, preds[i]);
  }
  write_file(dir + "/labels/coco_pope_random.json", labels);
  write_file(dir + "/questions.jsonl", questions);
  write_file(dir + "/answers.jsonl", answers);
  const auto r = score("--benchmark pope --answers " + dir + "/answers.jsonl --questions " + dir +
                       "/questions.jsonl --annotations " + dir + "/labels --json " + dir + "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  54.55  mean F1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("random"), std::string::npos) << r.out;
  const json j = read_json(dir + "/res.json");
  EXPECT_NEAR(j["benchmarks"]["pope"]["values"]["accuracy_random"].get<double>(), 50.0, 1e-9);
  EXPECT_EQ(j["benchmarks"]["pope"]["breakdown"]["splits"][0]["TP"], 3);
  EXPECT_EQ(j["method"], "tiny-test");  // no --method: the answers' model_id

  const auto missing = score("--benchmark pope --answers " + dir + "/answers.jsonl --annotations " + dir + "/labels");
  expect_score_error(missing, "--questions");
}

TEST(EraScoreCli, MmeSqaMmbenchTextVqaAndVqaV2) {
  const auto dir = test::scratch_dir("era_score_all");
  // MME: one image, both answers right -> 200.
  std::filesystem::create_directories(dir + "/MME/existence");
  write_file(dir + "/MME/existence/1.txt",
             "Is there a dog? Please answer yes or no.\tYes\nIs there a cat? Please answer yes or no.\tNo\n");
  const std::string s = "\nAnswer the question using a single word or phrase.";
  write_file(dir + "/mme.jsonl", answer_line("existence/1.jpg", "Yes", "Is there a dog?" + s) +
                                     answer_line("existence/1.jpg", "No", "Is there a cat?" + s));
  auto r = score("--benchmark mme --answers " + dir + "/mme.jsonl --annotations " + dir + "/MME --json " + dir + "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  200.00  Perception"), std::string::npos) << r.out;

  // ScienceQA: the §4.3 vector -> IMG 50%.
  write_file(dir + "/problems.json", R"({"q1": {"answer": 1, "choices": ["x","y","z"], "split": "test"},
    "q2": {"answer": 0, "choices": ["x","y"], "split": "test"}, "q3": {"answer": 2, "choices": ["a","b","c","d"], "split": "test"},
    "q4": {"answer": 0, "choices": ["a","b"], "split": "test"}})");
  write_file(dir + "/sqa.jsonl", answer_line("q1", "B", "<image>\nWhich?") + answer_line("q2", "B.", "<image>\nWhich?") +
                                     answer_line("q3", "The answer is C.", "Which?") + answer_line("q4", "A", "Which?"));
  r = score("--benchmark sqa --answers " + dir + "/sqa.jsonl --annotations " + dir + "/problems.json --json " + dir +
            "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  50.00  IMG accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("accuracy = 75.00"), std::string::npos) << r.out;

  // MMBench: group 5 right in both rotations, group 6 wrong in one -> 50%.
  write_file(dir + "/dev.tsv",
             "index\tquestion\tA\tB\tanswer\tcategory\n5\tq\tcat\tdog\tB\tc1\n1000005\tq\tdog\tcat\tA\tc1\n"
             "6\tq\tcat\tdog\tB\tc2\n1000006\tq\tdog\tcat\tA\tc2\n");
  write_file(dir + "/mmb.jsonl",
             answer_line(5, "B") + answer_line(1000005, "A") + answer_line(6, "B") + answer_line(1000006, "B"));
  r = score("--benchmark mmbench_cn --answers " + dir + "/mmb.jsonl --annotations " + dir + "/dev.tsv --json " + dir +
            "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MMBench-CN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("score  50.00  circular accuracy"), std::string::npos) << r.out;

  // TextVQA: T3's answers, prediction "Coke" -> 90%.
  json tv = {{"data", json::array({{{"image_id", "abc"},
                                    {"question", "What brand?"},
                                    {"answers",
                                     {"coca cola", "coca cola", "coca-cola", "Coca Cola", "coke", "coke", "coke", "pepsi",
                                      "coca cola company", "cola"}}}})}};
  write_file(dir + "/textvqa.json", tv.dump());
  write_file(
      dir + "/textvqa.jsonl",
      answer_line("abc", "Coke", "What brand?\nReference OCR token: coke\nAnswer the question using a single word or phrase."));
  r = score("--benchmark textvqa --answers " + dir + "/textvqa.jsonl --annotations " + dir + "/textvqa.json --json " + dir +
            "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  90.00  VQA accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OCR tokens in every prompt"), std::string::npos) << r.out;

  // VQAv2: val score and the test-dev upload in one run.
  json vq = {
      {"info", {{"year", 2017}}},
      {"annotations",
       json::array(
           {{{"question_id", 1}, {"answer_type", "number"}, {"multiple_choice_answer", "2"}, {"answers", json::array()}}})}};
  for (int i = 0; i < 10; ++i)
    vq["annotations"][0]["answers"].push_back({{"answer", "2"}, {"answer_confidence", "yes"}, {"answer_id", i + 1}});
  write_file(dir + "/vqav2_ann.json", vq.dump());
  write_file(dir + "/vqav2.jsonl", answer_line(1, "Two"));
  write_file(dir + "/test2015.jsonl", "{\"question_id\": 1, \"image\": \"a.jpg\"}\n{\"question_id\": 2, \"image\": \"b.jpg\"}\n");
  r = score("--benchmark vqav2 --answers " + dir + "/vqav2.jsonl --annotations " + dir + "/vqav2_ann.json --upload " + dir +
            "/upload.json --test-questions " + dir + "/test2015.jsonl --json " + dir + "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  100.00  VQA accuracy"), std::string::npos) << r.out;
  EXPECT_EQ(read_json(dir + "/upload.json"),
            json::parse(R"([{"question_id": 1, "answer": "2"}, {"question_id": 2, "answer": ""}])"));

  // All of them went into one results file.
  const json j = read_json(dir + "/res.json");
  for (const char* key : {"mme", "sqa", "mmbench_cn", "textvqa", "vqav2"}) EXPECT_TRUE(j["benchmarks"].contains(key)) << key;
  EXPECT_DOUBLE_EQ(j["benchmarks"]["mme"]["values"]["total"].get<double>(), 200.0);
}

TEST(EraScoreCli, RetentionComparesResultsFiles) {
  const auto dir = test::scratch_dir("era_score_retention");
  const std::vector<std::string> names = {"gqa", "mmbench", "mme", "pope", "sqa", "vqav2", "textvqa"};
  const std::vector<double> full = {61.9, 64.7, 1862, 85.9, 69.5, 78.5, 58.2};
  const std::vector<double> pruned = {57.6, 62.0, 1761.7, 80.9, 69.0, 75.6, 56.8};
  json f = {{"method", "LLaVA-1.5-7B"}, {"benchmarks", json::object()}};
  json p = {{"method", "pruned"}, {"benchmarks", json::object()}};
  for (size_t i = 0; i < names.size(); ++i) {
    f["benchmarks"][names[i]] = {{"score", full[i]}};
    p["benchmarks"][names[i]] = pruned[i];
  }
  write_file(dir + "/full.json", f.dump());
  write_file(dir + "/pruned.json", p.dump());
  // A results file written by era_score itself (GQA only) joins the comparison.
  write_gqa(dir);
  ASSERT_EQ(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/gqa_questions.json --json " + dir +
                  "/half.json --method half")
                .exit_code,
            0);
  const auto r = score("retention --reference " + dir + "/full.json --results " + dir + "/pruned.json " + dir +
                       "/half.json --json " + dir + "/table.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("95.84"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("80.78*"), std::string::npos) << r.out;  // 50 / 61.9, the only benchmark it has
  const json t = read_json(dir + "/table.json");
  EXPECT_NEAR(t["methods"][0]["avg"].get<double>(), 95.8362, 5e-5);
  EXPECT_EQ(t["methods"][1]["benchmarks_used"], 1);

  const auto only = score("retention --reference " + dir + "/full.json --results " + dir + "/pruned.json --benchmarks gqa,pope");
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_NE(only.out.find("94.18"), std::string::npos) << only.out;  // (93.05 + 94.18) / 2 = 93.62
  EXPECT_NE(only.out.find("93.62"), std::string::npos) << only.out;

  expect_score_error(score("retention --results " + dir + "/pruned.json"), "--reference");
  expect_score_error(score("retention --reference " + dir + "/full.json --results " + dir + "/nope.json"), "nope.json");
  expect_score_error(score("retention --reference " + dir + "/full.json --results " + dir + "/pruned.json --mme total"),
                     "needs values.perception");
  expect_score_error(score("retention --reference " + dir + "/pruned.json --results " + dir + "/full.json --benchmarks seed"),
                     "no score for benchmark seed");
}

TEST(EraScoreCli, BadInputsGiveOneErrorLine) {
  const auto dir = test::scratch_dir("era_score_errors");
  write_gqa(dir);
  const std::string gqa = "--benchmark gqa --annotations " + dir + "/gqa_questions.json ";
  expect_score_error(score(gqa + "--answers " + dir + "/missing.jsonl"), "missing.jsonl: not found");
  write_file(dir + "/broken.jsonl", answer_line("1", "a") + "{not json\n");
  expect_score_error(score(gqa + "--answers " + dir + "/broken.jsonl"), "broken.jsonl line 2: not valid JSON");
  write_file(dir + "/overflow.jsonl", answer_line("1", "a") + "{\"question_id\": 1e400, \"text\": \"a\"}\n");
  expect_score_error(score(gqa + "--answers " + dir + "/overflow.jsonl"), "overflow.jsonl line 2: not valid JSON");
  expect_score_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl"), "--annotations");
  expect_score_error(score("--benchmark nope --answers x"), "nope");
  expect_score_error(score("--answers " + dir + "/gqa.jsonl"), "--benchmark");
  expect_score_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/missing.json"),
                     "missing.json: not found");
  write_file(dir + "/not_json.json", "{\"a\": [1, 2\n");
  expect_score_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/not_json.json"),
                     "not valid JSON");
  // Wrong annotation file for the answers: nothing can be scored.
  write_file(dir + "/other.json", R"({"999": {"answer": "yes"}})");
  expect_score_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/other.json"),
                     "no answer in");
  write_file(dir + "/empty.jsonl", "\n");
  expect_score_error(score(gqa + "--answers " + dir + "/empty.jsonl"), "no answer records");
  // --json never clobbers a file that is not a results file.
  write_file(dir + "/notes.json", "[1, 2, 3]");
  expect_score_error(score(gqa + "--answers " + dir + "/gqa.jsonl --json " + dir + "/notes.json"),
                     "not an era_score results file");
  EXPECT_EQ(test::read_file(dir + "/notes.json"), "[1, 2, 3]");
  expect_score_error(score(gqa + "--answers " + dir + "/gqa.jsonl --upload " + dir + "/u.json"), "only for vqav2");
  expect_score_error(score("--benchmark mme --answers " + dir + "/gqa.jsonl --annotations " + dir + "/nowhere"), "not a folder");
  // A results file is one model's: another model's answers are refused, the file left as it was.
  ASSERT_EQ(score(gqa + "--answers " + dir + "/gqa.jsonl --json " + dir + "/one_model.json").exit_code, 0);
  std::string other = test::read_file(dir + "/gqa.jsonl");
  for (size_t at = other.find("tiny-test"); at != std::string::npos; at = other.find("tiny-test", at))
    other.replace(at, 9, "other-llava");
  write_file(dir + "/other_model.jsonl", other);
  const std::string before = test::read_file(dir + "/one_model.json");
  expect_score_error(score(gqa + "--answers " + dir + "/other_model.jsonl --name gqa_other --json " + dir + "/one_model.json"),
                     "holds gqa scores of model 'tiny-test', these answers are from model 'other-llava'");
  EXPECT_EQ(test::read_file(dir + "/one_model.json"), before);
  const auto help = score("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("retention"), std::string::npos);
}

// era_eval-style answers of four runs (full, era at 16 and 8, era:dep at 8) on GQA and POPE ->
// one results file per run -> the comparison table, checked cell by cell against hand-computed
// values: GQA 4/4, 3/4, 2/4, 3/4; POPE F1 1, 2/3 (TP 1 FN 1), 4/5 (TP 2 FP 1); Avg. (%) the mean of
// the ratios (era:dep has no POPE: GQA alone, starred); visual tokens the mean real counts (era:dep
// saw 6, 8, 10, 12 -> 9.0 for a nominal 8).
TEST(EraScoreCli, CompareWritesThePapersTable) {
  const auto dir = test::scratch_dir("era_score_compare");
  std::filesystem::create_directories(dir + "/labels");
  const std::vector<std::string> gold = {"yes", "no", "left", "red"};
  json gqa = json::object();
  std::string labels, questions;
  for (int i = 0; i < 4; ++i) {
    gqa["g" + std::to_string(i)] = {
        {"answer", gold[static_cast<size_t>(i)]}, {"isBalanced", true}, {"types", {{"structural", "query"}}}};
    labels += json{{"question_id", i + 1}, {"label", i < 2 ? "yes" : "no"}}.dump() + "\n";
    questions += json{{"question_id", 101 + i}, {"image", "x.jpg"}, {"text", "t"}, {"category", "random"}}.dump() + "\n";
  }
  write_file(dir + "/gqa_questions.json", gqa.dump());
  write_file(dir + "/labels/coco_pope_random.json", labels);
  write_file(dir + "/pope_questions.jsonl", questions);
  struct Run {
    std::string name, method;
    int tokens;
    std::vector<int> visual;
    std::vector<std::string> gqa, pope;  // pope empty: not evaluated
  };
  const std::vector<Run> runs = {
      {"full", "full", 0, {576, 576, 576, 576}, {"yes", "no", "left", "red"}, {"Yes", "Yes", "No", "No"}},
      {"era_16", "era", 16, {16, 16, 16, 16}, {"yes", "no", "left", "blue"}, {"Yes", "No", "No", "No"}},
      {"era_8", "era", 8, {8, 8, 8, 8}, {"yes", "no", "right", "blue"}, {"Yes", "Yes", "Yes", "No"}},
      {"era-dep_8", "era:dep", 8, {6, 8, 10, 12}, {"yes", "no", "left", "blue"}, {}}};
  std::string results;
  for (const auto& run : runs) {
    const auto answers = [&](const std::string& bench, const std::vector<std::string>& texts, int first_id) {
      std::string text;
      for (int i = 0; i < 4; ++i) {
        const json id = bench == "gqa" ? json("g" + std::to_string(i)) : json(first_id + i);
        text += json{{"question_id", id},
                     {"prompt", "q"},
                     {"text", texts[static_cast<size_t>(i)]},
                     {"model_id", "llava-tiny"},
                     {"metadata",
                      {{"line", i},
                       {"method", run.method},
                       {"tokens", run.tokens},
                       {"visual_tokens", run.visual[static_cast<size_t>(i)]}}}}
                    .dump() +
                "\n";
      }
      const std::string path = dir + "/" + bench + "_" + run.name + ".jsonl";
      write_file(path, text);
      return path;
    };
    const std::string json_path = dir + "/" + run.name + ".json";
    auto r = score("--benchmark gqa --answers " + answers("gqa", run.gqa, 0) + " --annotations " + dir +
                   "/gqa_questions.json --json " + json_path);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (!run.pope.empty()) {
      r = score("--benchmark pope --answers " + answers("pope", run.pope, 101) + " --questions " + dir +
                "/pope_questions.jsonl --annotations " + dir + "/labels --json " + json_path);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    results += " " + json_path;
  }
  const json era8 = read_json(dir + "/era-dep_8.json");
  EXPECT_EQ(era8["method"], "era:dep");  // no --method: the answers' reduction method
  EXPECT_EQ(era8["reduction"], json({{"method", "era:dep"}, {"tokens", 8}}));
  EXPECT_EQ(era8["benchmarks"]["gqa"]["visual_tokens"], json({{"mean", 9.0}, {"answers", 4}}));

  const auto r = score("compare --results" + results + " --json " + dir + "/table.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "| Method                             |   GQA |  POPE | Avg. (%) | Visual tokens |\n"
            "| :--------------------------------- | ----: | ----: | -------: | ------------: |\n"
            "| **Upper bound: 576 tokens (100%)** |       |       |          |               |\n"
            "| full                               | 100.0 | 100.0 |   100.0% |         576.0 |\n"
            "| **Retain 16 tokens (\xE2\x86\x93 97.2%)**     |       |       |          |               |\n"
            "| era                                |  75.0 |  66.7 |    70.8% |          16.0 |\n"
            "| **Retain 8 tokens (\xE2\x86\x93 98.6%)**      |       |       |          |               |\n"
            "| era                                |  50.0 |  80.0 |    65.0% |           8.0 |\n"
            "| era:dep                            |  75.0 |     - |   75.0%* |           9.0 |\n"
            "\n"
            "Avg. (%): 100 x the unweighted mean over the benchmarks of score / upper bound. Visual tokens: the mean "
            "number of visual tokens the decoder really saw per answer (era_eval's metadata.visual_tokens); the budget "
            "in each heading is the nominal one. MME enters as Perception.\n"
            "\n"
            "\\* averaged over the benchmarks the run has (\"-\" = missing).\n");
  const json t = read_json(dir + "/table.json");
  ASSERT_EQ(t["groups"].size(), 3u);
  EXPECT_EQ(t["groups"][2]["tokens"], 8);
  EXPECT_DOUBLE_EQ(t["groups"][2]["rows"][1]["visual_tokens_mean"].get<double>(), 9.0);
  EXPECT_NEAR(t["groups"][1]["rows"][0]["avg"].get<double>(), 100.0 * (0.75 + 2.0 / 3.0) / 2, 1e-9);
  EXPECT_EQ(t["groups"][2]["rows"][1]["benchmarks_used"], 1);

  // One results file is one run: another run's answers are refused, the file is left as it was.
  const std::string before = test::read_file(dir + "/era_16.json");
  expect_score_error(score("--benchmark gqa --answers " + dir + "/gqa_era_8.jsonl --annotations " + dir +
                           "/gqa_questions.json --json " + dir + "/era_16.json"),
                     "one results file per (method, budget)");
  EXPECT_EQ(test::read_file(dir + "/era_16.json"), before);
  // Without the full model's results there is no upper bound unless one is named.
  expect_score_error(score("compare --results " + dir + "/era_16.json " + dir + "/era_8.json"), "--reference");
  const auto named = score("compare --reference " + dir + "/era_16.json --results " + dir + "/era_8.json");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_NE(named.out.find("**Upper bound: 16 tokens (100%)**"), std::string::npos) << named.out;
  EXPECT_NE(named.out.find("**Retain 8 tokens (\xE2\x86\x93 50.0%)**"), std::string::npos) << named.out;
}

}  // namespace
}  // namespace era
