// MMBench circular evaluation (spec §4.7), the TSV reader, letter extraction, the "Avg. (%)"
// retention of §7 (hand vector and the ERA paper's own rows), and the answer-file reader.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/score/mmbench.h"
#include "apps/score/retention.h"
#include "apps/score/score_test_util.h"
#include "test_support.h"

namespace era::score {
namespace {

using test_util::answer_line;
using test_util::answers_from;
using test_util::error_line;
using test_util::write_file;

TEST(MmBenchScore, ExtractsLettersLikeVlmEvalKitExactMode) {
  const std::vector<std::string> opts = {"cat", "dog", "bird", "fish"};
  EXPECT_EQ(mmbench_extract("B", opts), 'B');
  EXPECT_EQ(mmbench_extract("The answer is C", opts), 'C');
  EXPECT_EQ(mmbench_extract("A. cat", opts), 'A');
  EXPECT_EQ(mmbench_extract("(D)", opts), 'D');
  EXPECT_EQ(mmbench_extract("The answer is A, not B.", opts), 'A');  // two letters: "answer is X"
  EXPECT_EQ(mmbench_extract("the ANSWER IS (B) for sure", opts), 'B');
  EXPECT_EQ(mmbench_extract("It is a dog", opts), 'B');  // text fallback
  EXPECT_EQ(mmbench_extract("Sorry, I can't help with images of people yet.", opts), 'Z');
  EXPECT_EQ(mmbench_extract("Z", opts), 'Z');
  EXPECT_EQ(mmbench_extract("E", opts), std::nullopt);               // not an option letter
  EXPECT_EQ(mmbench_extract("a", opts), std::nullopt);               // lowercase is no letter
  EXPECT_EQ(mmbench_extract("A cat or a dog", opts), std::nullopt);  // two option texts
  // A letter too early in a long answer is not taken (position must be > #tokens - 5).
  EXPECT_EQ(mmbench_extract("A big cat sat there", opts), 'A');  // "A" at token 0 of 5 is too early; text fallback finds "cat"
  EXPECT_EQ(mmbench_extract("A large cat sits on the mat today", opts), std::nullopt);  // too long for the fallback
  EXPECT_EQ(mmbench_extract("C is what one might say here but honestly unsure", {"x1", "y1", "z1"}), std::nullopt);
  // Too long for the text fallback (> 2 x total option length).
  EXPECT_EQ(mmbench_extract("this is a very long rambling answer about a bird", {"bird", "cat"}), std::nullopt);
}

TEST(MmBenchScore, ParsesTsvLikePandas) {
  const Tsv t = parse_tsv("index\tquestion\tA\r\n1\t\"has\ttab and\nnewline \"\"q\"\"\"\tx\n\n2\tplain \"mid\" quote\ty\n");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.column("A"), 2);
  EXPECT_EQ(t.column("B"), -1);
  EXPECT_EQ(t.rows[0][1], "has\ttab and\nnewline \"q\"");
  EXPECT_EQ(t.rows[0][2], "x");
  EXPECT_EQ(t.rows[1][1], "plain \"mid\" quote");
  const Tsv d = parse_tsv("image\tindex\nQUJD\t1\n\"x\ty\"\t2\n", {"image"});
  ASSERT_EQ(d.rows.size(), 2u);
  EXPECT_EQ(d.rows[0], (std::vector<std::string>{"", "1"}));  // dropped column: empty, row kept
  EXPECT_EQ(d.rows[1], (std::vector<std::string>{"", "2"}));
}

std::string mmb_tsv() {
  // Group 5 and 6: two rotations of a 2-option question; group 7: four rotations of 4 options.
  std::string tsv = "index\tquestion\thint\tA\tB\tC\tD\tanswer\tcategory\tl2-category\timage\tsource\tsplit\n";
  auto row = [&](int64_t index, const std::vector<std::string>& opts, const std::string& answer, const std::string& cat) {
    tsv += std::to_string(index) + "\tWhat is it?\tnan";
    for (size_t i = 0; i < 4; ++i) tsv += "\t" + (i < opts.size() ? opts[i] : std::string());
    tsv += "\t" + answer + "\t" + cat + "\tperception\tiVBORw0KGgo=\tsrc\tdev\n";
  };
  row(5, {"cat", "dog"}, "B", "animals");
  row(1000005, {"dog", "cat"}, "A", "animals");
  row(6, {"cat", "dog"}, "B", "animals");
  row(1000006, {"dog", "cat"}, "A", "animals");
  row(7, {"a", "b", "c", "d"}, "C", "letters");
  row(1000007, {"b", "c", "d", "a"}, "B", "letters");
  row(2000007, {"c", "d", "a", "b"}, "A", "letters");
  row(3000007, {"d", "a", "b", "c"}, "D", "letters");
  return tsv;
}

TEST(MmBenchScore, CircularTestVectorIsTwoThirds) {
  const auto dir = test::scratch_dir("score_mmbench_vector");
  write_file(dir + "/dev.tsv", mmb_tsv());
  const auto rows = read_mmbench_tsv(dir + "/dev.tsv");
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows[0].options, (std::vector<std::string>{"cat", "dog"}));  // C, D empty: not options
  EXPECT_EQ(rows[1].group(), 5);
  const auto answers = answers_from(answer_line(5, "B") + answer_line(1000005, "A") + answer_line(6, "B") +
                                    answer_line(1000006, "B") + answer_line(7, "C") + answer_line(1000007, "B") +
                                    answer_line(2000007, "The answer is A") + answer_line(3000007, "D"));
  const MmbResult r = score_mmbench(answers, rows);
  EXPECT_EQ(r.groups, 3u);
  EXPECT_EQ(r.correct_groups, 2u);
  EXPECT_NEAR(r.circular_accuracy, 200.0 / 3.0, 1e-9);  // 66.67%
  EXPECT_EQ(r.first_pass_rows, 3u);
  EXPECT_NEAR(r.first_pass_accuracy, 100.0, 1e-12);  // vanilla single pass would be 3/3
  ASSERT_EQ(r.by_category.size(), 2u);
  EXPECT_EQ(r.by_category[0].name, "animals");
  EXPECT_EQ(r.by_category[0].correct, 1u);
  EXPECT_EQ(r.by_category[1].correct, 1u);
}

TEST(MmBenchScore, GroupsWithUnansweredRowsAreNotScored) {
  const auto dir = test::scratch_dir("score_mmbench_partial");
  write_file(dir + "/dev.tsv", mmb_tsv());
  const auto rows = read_mmbench_tsv(dir + "/dev.tsv");
  const auto answers = answers_from(answer_line(5, "B") + answer_line(1000005, "A") + answer_line(6, "B") + error_line(1000006) +
                                    answer_line(7, "C") + answer_line(99, "A") + answer_line(7, "I cannot tell"));
  const MmbResult r = score_mmbench(answers, rows);
  EXPECT_EQ(r.groups, 1u);
  EXPECT_EQ(r.correct_groups, 1u);
  EXPECT_EQ(r.incomplete_groups, 2u);
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.duplicates, 1u);
  EXPECT_EQ(r.unparsed, 1u);  // row 7's last answer has no letter
}

TEST(MmBenchScore, RejectsTsvWithoutAnswers) {
  const auto dir = test::scratch_dir("score_mmbench_bad");
  write_file(dir + "/test.tsv", "index\tquestion\tA\tB\n1\tq\tx\ty\n");
  test::expect_invalid_argument([&] { read_mmbench_tsv(dir + "/test.tsv"); }, "no \"answer\" column");
  write_file(dir + "/dup.tsv", "index\tanswer\tA\n1\tA\tx\n1\tA\tx\n");
  test::expect_invalid_argument([&] { read_mmbench_tsv(dir + "/dup.tsv"); }, "appears twice");
}

TEST(RetentionScore, HandVectorOfSection7) {
  const std::vector<double> full = {61.9, 64.7, 1862, 85.9, 69.5, 78.5, 58.2};
  const std::vector<double> pruned = {57.6, 62.0, 1761.7, 80.9, 69.0, 75.6, 56.8};
  EXPECT_NEAR(retention_average(pruned, full), 95.8362, 5e-5);
  MethodScores ref{"full", {}, {}, {}, {}}, m{"pruned", {}, {}, {}, {}};
  const std::vector<std::string> names = {"gqa", "mmbench", "mme", "pope", "sqa", "vqav2", "textvqa"};
  for (size_t i = 0; i < names.size(); ++i) {
    ref.scores[names[i]] = full[i];
    m.scores[names[i]] = pruned[i];
  }
  const RetentionTable t = retention(ref, {m});
  EXPECT_EQ(t.benchmarks, (std::vector<std::string>{"vqav2", "gqa", "sqa", "textvqa", "pope", "mme", "mmbench"}));
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_NEAR(*t.rows[0].average, 95.8362, 5e-5);
  EXPECT_NEAR(*t.rows[0].relative[1], 93.05, 5e-3);  // GQA
  EXPECT_NEAR(*t.rows[0].relative[5], 94.61, 5e-3);  // MME as a ratio of totals
  EXPECT_NE(format_retention(t).find("95.84"), std::string::npos);
}

TEST(RetentionScore, ReproducesTheEraPaperLlava7BRows) {
  // Table 1, LLaVA-1.5-7B at 32 tokens: Ours 93.4%; AgilePrune has no MM-Vet and still gets 92.4%.
  const std::vector<std::string> b = {"vqav2", "gqa", "sqa", "textvqa", "pope", "mme", "mmbench", "mmbench_cn", "mmvet"};
  const std::vector<double> full = {78.5, 61.9, 69.5, 58.2, 85.9, 1506.5, 64.7, 58.1, 31.3};
  const std::vector<double> ours = {73.6, 56.9, 69.1, 54.6, 85.6, 1312.6, 60.9, 52.1, 28.5};
  const std::vector<double> agile = {74.0, 54.1, 69.0, 54.5, 80.1, 1297.3, 60.4, 53.6};
  MethodScores ref{"LLaVA-1.5-7B", {}, {}, {}, {}}, o{"Ours", {}, {}, {}, {}}, a{"AgilePrune", {}, {}, {}, {}};
  for (size_t i = 0; i < b.size(); ++i) {
    ref.scores[b[i]] = full[i];
    o.scores[b[i]] = ours[i];
    if (i < agile.size()) a.scores[b[i]] = agile[i];
  }
  const RetentionTable t = retention(ref, {o, a});
  EXPECT_NEAR(*t.rows[0].average, 93.4, 0.05);
  EXPECT_EQ(t.rows[1].used, 8u);
  EXPECT_FALSE(t.rows[1].scores[8].has_value());
  EXPECT_NEAR(*t.rows[1].average, 92.4, 0.05);
  const std::string table = format_retention(t);
  EXPECT_NE(table.find("92.44*"), std::string::npos) << table;
  // An explicit benchmark list restricts the average.
  const RetentionTable two = retention(ref, {o}, {"gqa", "pope"});
  EXPECT_NEAR(*two.rows[0].average, 100.0 * (56.9 / 61.9 + 85.6 / 85.9) / 2, 1e-9);
  test::expect_invalid_argument([&] { retention(ref, {o}, {"seed"}); }, "no score for benchmark seed");
}

TEST(RetentionScore, ReadsResultsFilesWithMmePerceptionOrTotal) {
  const auto dir = test::scratch_dir("score_retention_read");
  write_file(dir + "/full.json", R"({"method": "full", "benchmarks": {
      "gqa": {"score": 61.9}, "mme": {"score": 1510.0, "values": {"perception": 1510.0, "cognition": 350.0}}}})");
  write_file(dir + "/hand.json", R"({"benchmarks": {"gqa": 55.0, "mme": 1400}})");
  const MethodScores full = read_results(dir + "/full.json");
  EXPECT_EQ(full.name, "full");
  EXPECT_DOUBLE_EQ(full.scores.at("mme"), 1510.0);
  EXPECT_DOUBLE_EQ(read_results(dir + "/full.json", MmeTotal::kPerceptionCognition).scores.at("mme"), 1860.0);
  const MethodScores hand = read_results(dir + "/hand.json");
  EXPECT_EQ(hand.name, "hand");  // no "method": the file stem
  EXPECT_DOUBLE_EQ(hand.scores.at("gqa"), 55.0);
  test::expect_invalid_argument([&] { read_results(dir + "/hand.json", MmeTotal::kPerceptionCognition); },
                                "needs values.perception");
  write_file(dir + "/bad.json", R"({"gqa": 1})");
  test::expect_invalid_argument([&] { read_results(dir + "/bad.json"); }, "era_score --json");
  test::expect_invalid_argument([&] { read_results(dir + "/missing.json"); }, "missing.json: not found");
}

TEST(ScoreAnswers, ReadsLlavaAnswerLinesAndFlagsErrorRecords) {
  const auto f =
      answers_from(R"({"question_id": 3, "prompt": "p", "text": "Yes", "answer_id": "a", "model_id": "m", "metadata": {}})"
                   "\n"
                   "\n"
                   R"({"question_id": "x/1.jpg", "text": "No"})"
                   "\r\n"
                   R"({"question_id": 4, "prompt": "p", "text": "", "metadata": {"error": "image not found"}})"
                   "\n"
                   R"({"question_id": 5, "error": "out of memory"})"
                   "\n"
                   R"({"question_id": 6, "text": "ok", "metadata": {"error": null}})"
                   "\n");
  ASSERT_EQ(f.records.size(), 5u);
  EXPECT_EQ(f.records[0].question_id, "3");
  EXPECT_TRUE(f.records[0].question_id_is_number);
  EXPECT_EQ(f.records[0].line, 1u);
  EXPECT_EQ(f.records[1].question_id, "x/1.jpg");
  EXPECT_FALSE(f.records[1].has_prompt);
  EXPECT_EQ(f.records[1].line, 3u);
  EXPECT_TRUE(f.records[2].is_error);
  EXPECT_EQ(f.records[2].error, "image not found");
  EXPECT_TRUE(f.records[3].is_error);
  EXPECT_FALSE(f.records[4].is_error);
  EXPECT_EQ(f.error_records(), 2u);
  EXPECT_EQ(f.answered(), 3u);
  EXPECT_EQ(f.model_id(), "m");
}

TEST(ScoreAnswers, BadLinesNameTheFileAndLine) {
  test::expect_invalid_argument([] { answers_from("{\"question_id\": 1, \"text\": \"a\"}\n{oops\n"); },
                                "test.jsonl line 2: not valid JSON");
  // A number beyond a double is nlohmann's out_of_range, not a parse_error: still the file's fault.
  test::expect_invalid_argument([] { answers_from("{\"question_id\": 1e400, \"text\": \"a\"}\n"); },
                                "test.jsonl line 1: not valid JSON");
  test::expect_invalid_argument([] { answers_from("[1]\n"); }, "line 1: expected a JSON object");
  test::expect_invalid_argument([] { answers_from("{\"text\": \"a\"}\n"); }, "no question_id");
  test::expect_invalid_argument([] { answers_from("{\"question_id\": 1}\n"); }, "no text");
  test::expect_invalid_argument([] { answers_from("{\"question_id\": 1.5, \"text\": \"a\"}\n"); }, "string or an integer");
  test::expect_invalid_argument([] { answers_from("{\"question_id\": 1, \"text\": 7}\n"); }, "text is not a string");
  test::expect_invalid_argument([] { read_answers("/nonexistent/answers.jsonl"); },
                                "answers /nonexistent/answers.jsonl: not found");
}

}  // namespace
}  // namespace era::score
