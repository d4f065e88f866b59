// era_score end to end on small files: each benchmark prints its table and stores its score in a
// results JSON, `retention` turns those files into Avg. (%), and every bad input gives one
// "era_score: error:" line and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "eval/score_test_util.h"
#include "test_support.h"

namespace era {
namespace {

using score::test_util::answer_line;
using score::test_util::error_line;
using score::test_util::write_file;
using nlohmann::json;

test::CommandResult score(const std::string& args) { return test::run_command(test::era_score_path() + " " + args); }

void expect_clean_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("era_score: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

json read_json(const std::string& path) { return json::parse(test::read_file(path)); }

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
  const auto r = score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir +
                       "/gqa_questions.json --json " + dir + "/era.json --method era-64");
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

TEST(EraScoreCli, PopeReportsEachSplitAndTheMeanF1) {
  const auto dir = test::scratch_dir("era_score_pope");
  std::filesystem::create_directories(dir + "/labels");
  const std::vector<std::string> preds = {"Yes", "Yes, there is a dog.", "No", "There is no dog.", "yes",
                                          "No",  "Yes",                  "no.", "I don't think so", "Yes"};
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
  expect_clean_error(missing, "--questions");
}

TEST(EraScoreCli, MmeSqaMmbenchTextVqaAndVqaV2) {
  const auto dir = test::scratch_dir("era_score_all");
  // MME: one image, both answers right -> 200.
  std::filesystem::create_directories(dir + "/MME/existence");
  write_file(dir + "/MME/existence/1.txt", "Is there a dog? Please answer yes or no.\tYes\nIs there a cat? Please answer yes or no.\tNo\n");
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
  r = score("--benchmark sqa --answers " + dir + "/sqa.jsonl --annotations " + dir + "/problems.json --json " + dir + "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  50.00  IMG accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("accuracy = 75.00"), std::string::npos) << r.out;

  // MMBench: group 5 right in both rotations, group 6 wrong in one -> 50%.
  write_file(dir + "/dev.tsv", "index\tquestion\tA\tB\tanswer\tcategory\n5\tq\tcat\tdog\tB\tc1\n1000005\tq\tdog\tcat\tA\tc1\n"
                               "6\tq\tcat\tdog\tB\tc2\n1000006\tq\tdog\tcat\tA\tc2\n");
  write_file(dir + "/mmb.jsonl", answer_line(5, "B") + answer_line(1000005, "A") + answer_line(6, "B") + answer_line(1000006, "B"));
  r = score("--benchmark mmbench_cn --answers " + dir + "/mmb.jsonl --annotations " + dir + "/dev.tsv --json " + dir + "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MMBench-CN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("score  50.00  circular accuracy"), std::string::npos) << r.out;

  // TextVQA: T3's answers, prediction "Coke" -> 90%.
  json tv = {{"data", json::array({{{"image_id", "abc"},
                                    {"question", "What brand?"},
                                    {"answers", {"coca cola", "coca cola", "coca-cola", "Coca Cola", "coke", "coke", "coke",
                                                 "pepsi", "coca cola company", "cola"}}}})}};
  write_file(dir + "/textvqa.json", tv.dump());
  write_file(dir + "/textvqa.jsonl", answer_line("abc", "Coke", "What brand?\nReference OCR token: coke\nAnswer the question using a single word or phrase."));
  r = score("--benchmark textvqa --answers " + dir + "/textvqa.jsonl --annotations " + dir + "/textvqa.json --json " + dir + "/res.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("score  90.00  VQA accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OCR tokens in every prompt"), std::string::npos) << r.out;

  // VQAv2: val score and the test-dev upload in one run.
  json vq = {{"info", {{"year", 2017}}},
             {"annotations", json::array({{{"question_id", 1},
                                           {"answer_type", "number"},
                                           {"multiple_choice_answer", "2"},
                                           {"answers", json::array()}}})}};
  for (int i = 0; i < 10; ++i) vq["annotations"][0]["answers"].push_back({{"answer", "2"}, {"answer_confidence", "yes"}, {"answer_id", i + 1}});
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
  ASSERT_EQ(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/gqa_questions.json --json " +
                  dir + "/half.json --method half")
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

  expect_clean_error(score("retention --results " + dir + "/pruned.json"), "--reference");
  expect_clean_error(score("retention --reference " + dir + "/full.json --results " + dir + "/nope.json"), "nope.json");
  expect_clean_error(score("retention --reference " + dir + "/full.json --results " + dir + "/pruned.json --mme total"),
                     "needs values.perception");
  expect_clean_error(score("retention --reference " + dir + "/pruned.json --results " + dir + "/full.json --benchmarks seed"),
                     "no score for benchmark seed");
}

TEST(EraScoreCli, BadInputsGiveOneErrorLine) {
  const auto dir = test::scratch_dir("era_score_errors");
  write_gqa(dir);
  const std::string gqa = "--benchmark gqa --annotations " + dir + "/gqa_questions.json ";
  expect_clean_error(score(gqa + "--answers " + dir + "/missing.jsonl"), "missing.jsonl: cannot open");
  write_file(dir + "/broken.jsonl", answer_line("1", "a") + "{not json\n");
  expect_clean_error(score(gqa + "--answers " + dir + "/broken.jsonl"), "broken.jsonl line 2: not valid JSON");
  expect_clean_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl"), "--annotations");
  expect_clean_error(score("--benchmark nope --answers x"), "nope");
  expect_clean_error(score("--answers " + dir + "/gqa.jsonl"), "--benchmark");
  expect_clean_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/missing.json"),
                     "missing.json: cannot open");
  write_file(dir + "/not_json.json", "{\"a\": [1, 2\n");
  expect_clean_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/not_json.json"),
                     "not valid JSON");
  // Wrong annotation file for the answers: nothing can be scored.
  write_file(dir + "/other.json", R"({"999": {"answer": "yes"}})");
  expect_clean_error(score("--benchmark gqa --answers " + dir + "/gqa.jsonl --annotations " + dir + "/other.json"),
                     "no answer in");
  write_file(dir + "/empty.jsonl", "\n");
  expect_clean_error(score(gqa + "--answers " + dir + "/empty.jsonl"), "no answer records");
  // --json never clobbers a file that is not a results file.
  write_file(dir + "/notes.json", "[1, 2, 3]");
  expect_clean_error(score(gqa + "--answers " + dir + "/gqa.jsonl --json " + dir + "/notes.json"), "not an era_score results file");
  EXPECT_EQ(test::read_file(dir + "/notes.json"), "[1, 2, 3]");
  expect_clean_error(score(gqa + "--answers " + dir + "/gqa.jsonl --upload " + dir + "/u.json"), "only for vqav2");
  expect_clean_error(score("--benchmark mme --answers " + dir + "/gqa.jsonl --annotations " + dir + "/nowhere"), "not a folder");
  const auto help = score("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("retention"), std::string::npos);
}

}  // namespace
}  // namespace era
