// Video multiple-choice scoring (Video-MME, LongVideoBench, MVBench) as lmms-eval does it. The
// letter goldens were computed by lmms-eval's own extraction functions (videomme
// extract_characters_regex, longvideobench parse_multi_choice_response, mvbench mcq_acc's
// process), quirks included: Video-MME's fused prefixes and the first capital A-D anywhere
// ("Best option: E" reads as B); MVBench's lone article "a" ("a dog" reads as A) and its 32-period
// cap.
#include <gtest/gtest.h>

#include <algorithm>

#include "apps/score/report.h"
#include "apps/score/video_choice.h"
#include "score_test_util.h"
#include "test_support.h"

namespace era::score {
namespace {

using namespace test_util;

std::pair<size_t, size_t> counts(size_t answered, size_t correct) { return {answered, correct}; }

struct LetterCase {
  const char* text;
  const char* videomme;
  const char* longvideobench;  // "" also where lmms-eval would draw a random letter
};

TEST(VideoChoice, LettersAreReadAsLmmsEvalReadsThem) {
  const LetterCase cases[] = {
      {"A", "A", "A"},
      {" B. ", "B", "B"},
      {"(C) a dog", "C", "C"},
      {"The answer is D.", "D", "D"},
      {"The best answer is: A", "A", "A"},
      {"E", "", "E"},
      {"E. none", "", "E"},
      {"Best option: E", "B", "E"},
      {"The best option is B", "B", "B"},
      {"Answer: c", "A", "A"},
      {"a dog running in the park", "", ""},
      {"none of them, it is unclear what happens in the video at this time really", "", ""},
      {"Based on the video, C", "B", "B"},
      {"The correct answer is (B)", "B", "B"},
      {"The best option isThe correct option is C", "C", "C"},
      {"Best answer:Best option: D", "D", "D"},
      {"D) the cat", "D", "D"},
      {"", "", ""},
      {"\xE6\x88\x91\xE8\xAE\xA4\xE4\xB8\xBA\xE7\xAD\x94\xE6\xA1\x88\xE6\x98\xAF"
       "B",
       "B", "B"},
      {"option b", "", ""},
      {"\xC2\xA0"
       "A\xC2\xA0",
       "A", "A"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(video_choice_letter(c.text, VideoChoiceBenchmark::kVideoMme), c.videomme) << c.text;
    EXPECT_EQ(video_choice_letter(c.text, VideoChoiceBenchmark::kLongVideoBench), c.longvideobench) << c.text;
  }
}

TEST(VideoChoice, MvBenchLettersAreReadAsMcqAccReadsThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"A", "A"},
      {"(C) a dog", "C"},
      {"a. yes", "A"},  // "X. text": the letter, any case
      {"B.A", "B"},     // the same rule before the cleanup (which would make it "ba")
      {"B\nsome text", "B"},
      {"The answer is D.", "D"},
      {"Answer: c", "C"},
      {"Best option: E", "E"},
      {"E. none", "E"},
      {"option b", "B"},
      {"The correct answer is (B)", "B"},
      {"a dog running in the park", "A"},  // the article stands alone
      {"It is a cat. B", "A"},
      {"A,B, C", "C"},  // ", " present: every comma is deleted, "AB" is one word
      {"\xE7\xAD\x94\xE6\xA1\x88\xE6\x98\xAF"
       "B",
       ""},  // CJK characters are word characters: no \b
      {"\xE7\xAD\x94\xE6\xA1\x88\xEF\xBC\x9A"
       "B",
       "B"},  // a fullwidth colon is not
      {"\xC2\xA0"
       "A\xC2\xA0",
       "A"},
      {"\xEF\xBC\xA2", ""},  // fullwidth B
      {"(F) none of these", ""},
      {"DOG", ""},
      {"no idea", ""},
      {"I don't know", ""},
      {"", ""},
  };
  for (const auto& [text, letter] : cases) EXPECT_EQ(video_choice_letter(text, VideoChoiceBenchmark::kMvBench), letter) << text;
  // periodStrip.sub("", text, re.UNICODE) deletes at most 32 periods (re.UNICODE is 32, taken as
  // the count): with 31 before it the period of "a.b" goes too ("ab"), with 33 it stays.
  EXPECT_EQ(video_choice_letter(std::string(31, '.') + "a.b", VideoChoiceBenchmark::kMvBench), "");
  EXPECT_EQ(video_choice_letter(std::string(33, '.') + "a.b", VideoChoiceBenchmark::kMvBench), "A");
}

TEST(VideoChoice, MvBenchScoresPerTaskAndLeavesEmptyAnswersOut) {
  const std::string dir = test::scratch_dir("video_choice_mvbench");
  const std::string ann = dir + "/mvbench.jsonl";
  write_file(
      ann,
      R"({"question_id": "as_0", "task": "action_sequence", "candidates": ["The woman", "The man", "Nobody"], "answer": "The man"})"
      "\n"
      R"({"question_id": "as_1", "task": "action_sequence", "candidates": ["Yes", "No"], "answer": "Yes"})"
      "\n"
      R"({"question_id": "ac_0", "task": "action_count", "candidates": ["1", "2", "3", "4"], "answer": "(D) 4"})"
      "\n"
      R"({"question_id": "ac_1", "task": "action_count", "answer": "B"})"
      "\n"
      R"({"question_id": 7, "task": "scene_transition", "candidates": ["u", "v", "w", "x", "y", "z"], "answer": "z"})"
      "\n"
      R"({"question_id": "st_1", "task": "scene_transition", "candidates": ["u", "v", "w", "x", "y", "z"], "answer": "z"})"
      "\n"
      R"({"question_id": "st_2", "task": "scene_transition", "answer": "C"})"
      "\n");
  const auto q = read_video_choice_annotations(ann, VideoChoiceBenchmark::kMvBench);
  ASSERT_EQ(q.size(), 7u);
  EXPECT_EQ(q.at("as_0").answer, "B");  // the first candidate equal to the answer
  EXPECT_EQ(q.at("ac_0").answer, "D");
  EXPECT_EQ(q.at("7").answer, "F");
  ASSERT_EQ(q.at("as_0").groups.size(), 1u);
  EXPECT_EQ(q.at("as_0").groups[0], std::make_pair(std::string("task"), std::string("action_sequence")));
  // Each pair was scored by lmms-eval's mvbench_process_results: 1, 1, 1, 0, 1, 0. An answer
  // beyond E is right only when it cleans to that lowercase letter ("F"), not as "(F) z".
  const AnswerFile answers = answers_from(answer_line("as_0", "(B) The man") + answer_line("as_1", "a cat is shown") +
                                          answer_line("ac_0", "D. 4") + answer_line("ac_1", "no idea") + answer_line(7, "F") +
                                          answer_line("st_1", "(F) z") + answer_line("st_2", "") + error_line("zz"));
  const auto r = score_video_choice(answers, q, VideoChoiceBenchmark::kMvBench);
  EXPECT_EQ(r.total, 6u);
  EXPECT_EQ(r.correct, 4u);
  EXPECT_EQ(r.empty, 1u);     // mvbench_aggregate_results skips pred_answer == ""
  EXPECT_EQ(r.unparsed, 3u);  // "no idea", "F" and "(F) z" give no A-E letter
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.missing, 0u);
  EXPECT_NEAR(r.accuracy, 400.0 / 6.0, 1e-9);
  EXPECT_EQ(r.by_group.size(), 3u);
  EXPECT_EQ(r.by_group.at("task: action_sequence"), counts(2, 2));
  EXPECT_EQ(r.by_group.at("task: action_count"), counts(2, 1));
  EXPECT_EQ(r.by_group.at("task: scene_transition"), counts(2, 1));
  const ScoreReport report = make_report(r, VideoChoiceBenchmark::kMvBench);
  EXPECT_EQ(report.benchmark, "mvbench");
  EXPECT_NEAR(report.score, 400.0 / 6.0, 1e-9);
  EXPECT_NE(std::find(report.counts.begin(), report.counts.end(), std::make_pair(std::string("empty"), 1.0)),
            report.counts.end());
}

TEST(VideoChoice, VideoMmeAccuracyOverallAndPerGroup) {
  const std::string dir = test::scratch_dir("video_choice");
  const std::string ann = dir + "/videomme.json";
  write_file(ann, R"([
    {"question_id": "001-1", "answer": "A", "duration": "short", "domain": "Knowledge", "task_type": "Counting Problem"},
    {"question_id": "001-2", "answer": "B", "duration": "short", "domain": "Knowledge", "task_type": "OCR Problems"},
    {"question_id": "002-1", "answer": "C", "duration": "long", "domain": "Multilingual", "task_type": "OCR Problems"},
    {"question_id": "002-2", "answer": "D", "duration": "long", "domain": "Multilingual", "task_type": "Counting Problem"}])");
  const auto q = read_video_choice_annotations(ann, VideoChoiceBenchmark::kVideoMme);
  const AnswerFile answers = answers_from(answer_line("001-1", "A.") + answer_line("001-2", "The answer is C") +
                                          answer_line("002-1", "(C)") + error_line("002-2") + answer_line("999", "A"));
  const auto r = score_video_choice(answers, q, VideoChoiceBenchmark::kVideoMme);
  EXPECT_EQ(r.total, 3u);
  EXPECT_EQ(r.correct, 2u);
  EXPECT_NEAR(r.accuracy, 200.0 / 3.0, 1e-9);
  EXPECT_EQ(r.error_records, 1u);
  EXPECT_EQ(r.unmatched, 1u);
  EXPECT_EQ(r.missing, 1u);
  EXPECT_EQ(r.by_group.at("duration: short"), counts(2, 1));
  EXPECT_EQ(r.by_group.at("duration: long"), counts(1, 1));
  EXPECT_EQ(r.by_group.at("task_type: OCR Problems"), counts(2, 1));
  const ScoreReport report = make_report(r, VideoChoiceBenchmark::kVideoMme);
  EXPECT_EQ(report.benchmark, "videomme");
  EXPECT_NEAR(report.score, 200.0 / 3.0, 1e-9);
}

TEST(VideoChoice, LongVideoBenchReadsCorrectChoiceFromJsonLinesAndCountsUnparsed) {
  const std::string dir = test::scratch_dir("video_choice_lvb");
  const std::string ann = dir + "/lvb_val.jsonl";
  write_file(ann,
             "{\"id\": \"v1\", \"correct_choice\": 4, \"duration_group\": 600, \"question_category\": \"T3O\"}\n"
             "\n"
             "{\"id\": \"v2\", \"correct_choice\": 0, \"duration_group\": 15, \"question_category\": \"S2E\"}\n");
  const auto q = read_video_choice_annotations(ann, VideoChoiceBenchmark::kLongVideoBench);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q.at("v1").answer, "E");
  const auto r = score_video_choice(answers_from(answer_line("v1", "E. the last") + answer_line("v2", "no idea")), q,
                                    VideoChoiceBenchmark::kLongVideoBench);
  EXPECT_EQ(r.correct, 1u);
  EXPECT_EQ(r.unparsed, 1u);
  EXPECT_EQ(r.by_group.at("duration_group: 600"), counts(1, 1));
}

TEST(VideoChoice, BadAnnotationsNameTheRowAndTheField) {
  const std::string dir = test::scratch_dir("video_choice_bad");
  const auto expect_refused = [&](const std::string& content, VideoChoiceBenchmark b, const std::string& needle) {
    write_file(dir + "/a.json", content);
    try {
      read_video_choice_annotations(dir + "/a.json", b);
      ADD_FAILURE() << "accepted " << content;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_refused(R"([{"question_id": "1", "answer": "F"}])", VideoChoiceBenchmark::kVideoMme, "row 1: \"answer\" must be one of");
  expect_refused(R"([{"answer": "A"}])", VideoChoiceBenchmark::kVideoMme, "row 1: no \"question_id\"");
  expect_refused(R"([{"question_id": "1", "answer": "A"}, {"question_id": "1", "answer": "B"}])", VideoChoiceBenchmark::kVideoMme,
                 "row 2: question id \"1\" appears twice");
  expect_refused("{\"id\": \"v\", \"correct_choice\": 7}\n", VideoChoiceBenchmark::kLongVideoBench,
                 "\"correct_choice\" must be 0..4");
  expect_refused("{\"id\": \"v\"\n", VideoChoiceBenchmark::kLongVideoBench, "line 1: not valid JSON");
  expect_refused("[]", VideoChoiceBenchmark::kVideoMme, "no Video-MME rows");
  const auto mvb = VideoChoiceBenchmark::kMvBench;
  expect_refused(R"([{"question_id": "1", "task": "t", "candidates": ["x", "y"], "answer": "z"}])", mvb,
                 "row 1: \"answer\" \"z\" is not one of the \"candidates\"");
  expect_refused(R"([{"question_id": "1", "task": "t", "answer": "the man"}])", mvb, "give \"candidates\"");
  expect_refused(R"([{"question_id": "1", "task": "t", "candidates": ["x", "y"], "answer": "(B) x"}])", mvb,
                 "does not match candidate B \"y\"");
  expect_refused(R"([{"question_id": "1", "task": "t", "candidates": ["x", "y"], "answer": "C"}])", mvb,
                 "names option C but the row has 2");
  expect_refused(R"([{"question_id": "1", "task": "t", "answer": "F"}])", mvb, "must be a letter A-E");
  expect_refused(R"([{"question_id": "1", "answer": "A"}])", mvb, "row 1: no \"task\"");
  expect_refused(R"([{"question_id": "1", "task": "t", "candidates": "x", "answer": "A"}])", mvb, "list of strings");
}

}  // namespace
}  // namespace era::score
