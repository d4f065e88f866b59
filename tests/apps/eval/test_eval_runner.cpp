// The evaluation runner's parts without a model: LLaVA's sharding, question parsing, the
// crash-safe answers file, records, merge, progress text, and the runner itself over a stand-in
// backend (batch fallback, resume, retry of failed items, question order).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "apps/eval/answer_file.h"
#include "apps/eval/merge.h"
#include "apps/eval/progress.h"
#include "apps/eval/question_file.h"
#include "apps/eval/records.h"
#include "apps/eval/run_plan.h"
#include "apps/eval/runner.h"
#include "apps/eval/sharding.h"
#include "test_support.h"

namespace era::eval {
namespace {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) { test::write_file(path, text); }

std::vector<std::string> lines_of(const std::string& path) { return test::read_lines(path); }

// ---- sharding ----------------------------------------------------------------------------------

// LLaVA's split_list / get_chunk, transcribed: chunks of ceil(len / n), chunk k (or none).
std::vector<int64_t> python_chunk(int64_t len, int64_t n, int64_t k) {
  std::vector<std::vector<int64_t>> chunks;
  if (len > 0) {
    const int64_t size = (len + n - 1) / n;
    for (int64_t i = 0; i < len; i += size) {
      chunks.emplace_back();
      for (int64_t j = i; j < std::min(len, i + size); ++j) chunks.back().push_back(j);
    }
  }
  return k < static_cast<int64_t>(chunks.size()) ? chunks[static_cast<size_t>(k)] : std::vector<int64_t>{};
}

TEST(EvalSharding, MatchesLlavaSplitList) {
  const auto range = [](int64_t len, int64_t n, int64_t k) {
    const auto r = chunk_range(len, n, k);
    return std::pair{r.begin, r.end};
  };
  // Hand-derived: 10 in 4 -> 3+3+3+1; 9 in 4 -> 3+3+3 and an empty fourth; MME 2374 in 8 -> 297 each.
  EXPECT_EQ(range(10, 4, 0), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(range(10, 4, 3), (std::pair<int64_t, int64_t>{9, 10}));
  EXPECT_EQ(range(9, 4, 2), (std::pair<int64_t, int64_t>{6, 9}));
  EXPECT_EQ(chunk_range(9, 4, 3).size(), 0);
  EXPECT_EQ(range(2374, 8, 7), (std::pair<int64_t, int64_t>{2079, 2374}));
  EXPECT_EQ(range(7, 2, 1), (std::pair<int64_t, int64_t>{4, 7}));
  EXPECT_EQ(chunk_range(0, 3, 1).size(), 0);
  for (int64_t len = 0; len <= 40; ++len) {
    for (int64_t n = 1; n <= 9; ++n) {
      std::vector<int> covered(static_cast<size_t>(len), 0);
      for (int64_t k = 0; k < n; ++k) {
        const auto r = chunk_range(len, n, k);
        std::vector<int64_t> got;
        for (int64_t i = r.begin; i < r.end; ++i) {
          got.push_back(i);
          ++covered[static_cast<size_t>(i)];
        }
        EXPECT_EQ(got, python_chunk(len, n, k)) << len << " " << n << " " << k;
      }
      for (const int c : covered) EXPECT_EQ(c, 1) << len << " " << n;
    }
  }
  test::expect_invalid_argument([] { chunk_range(10, 0, 0); }, "--num-chunks");
  test::expect_invalid_argument([] { chunk_range(10, 2, 2); }, "--chunk-idx");
}

// ---- questions ---------------------------------------------------------------------------------

TEST(EvalQuestions, ParsesLinesAndKeepsBadOnesAsErrors) {
  const auto dir = test::scratch_dir("eval_questions");
  write_text(dir + "/q.jsonl",
             "\xEF\xBB\xBF{\"question_id\": 7, \"image\": \"a.png\", \"text\": \"Q1?\\nAnswer.\", \"category\": \"default\"}\r\n"
             "\n"
             "{\"question_id\": \"x/y.png\", \"image\": \"b.jpg\", \"text\": \"Q2\"}\n"
             "{\"question_id\": 9, \"image\": \"c.png\", \"text\": \"Q3\"\n"
             "{\"question_id\": 10, \"text\": \"no image\"}\n"
             "[1, 2]\n"
             "{\"image\": \"d.png\", \"text\": \"no id\"}");
  const auto q = read_questions(dir + "/q.jsonl");
  ASSERT_EQ(q.size(), 6u);  // the blank line is not a question
  EXPECT_EQ(q[0].line, 0);
  EXPECT_EQ(q[0].question_id, Json(7));
  EXPECT_EQ(q[0].text, "Q1?\nAnswer.");
  EXPECT_EQ(q[0].category, "default");
  EXPECT_TRUE(q[0].error.empty());
  EXPECT_EQ(q[1].line, 1);
  EXPECT_EQ(q[1].file_line, 3);
  EXPECT_EQ(q[1].question_id, Json("x/y.png"));
  EXPECT_TRUE(q[1].error.empty()) << q[1].error;
  EXPECT_NE(q[2].error.find("malformed question line"), std::string::npos) << q[2].error;
  EXPECT_TRUE(q[2].question_id.is_null());
  EXPECT_NE(q[3].error.find("\"image\""), std::string::npos) << q[3].error;
  EXPECT_EQ(q[3].question_id, Json(10));  // known, so its error record carries it
  EXPECT_NE(q[4].error.find("JSON object"), std::string::npos) << q[4].error;
  EXPECT_NE(q[5].error.find("question_id"), std::string::npos) << q[5].error;
  test::expect_invalid_argument([&] { read_questions(dir + "/none.jsonl"); }, "none.jsonl");
}

// ---- the answers file --------------------------------------------------------------------------

TEST(EvalAnswerFile, CutsATornLastLineAndAppendsWholeLines) {
  const auto dir = test::scratch_dir("eval_answer_file");
  const auto path = dir + "/a.jsonl";
  {
    AnswerFile f(path);
    EXPECT_TRUE(f.existing_lines().empty());
    f.append("{\"metadata\": {\"line\": 0}}");
    f.append("{\"metadata\": {\"line\": 1}}");
    test::expect_invalid_argument([&] { f.append("two\nlines"); }, "single line");
  }
  // A write cut short by SIGKILL: part of a record and no newline.
  { std::ofstream(path, std::ios::app) << "{\"metadata\": {\"li"; }
  {
    AnswerFile f(path);
    EXPECT_EQ(f.torn_bytes(), 17);
    ASSERT_EQ(f.existing_lines().size(), 2u);
    f.append("{\"metadata\": {\"line\": 2}}");
  }
  EXPECT_EQ(test::read_file(path),
            "{\"metadata\": {\"line\": 0}}\n{\"metadata\": {\"line\": 1}}\n{\"metadata\": {\"line\": 2}}\n");
  // A file with no complete line at all.
  write_text(path, "{\"meta");
  {
    AnswerFile f(path);
    EXPECT_EQ(f.torn_bytes(), 6);
    EXPECT_TRUE(f.existing_lines().empty());
  }
  EXPECT_EQ(test::read_file(path), "");
}

TEST(EvalAnswerFile, OneWriterAtATimeAndAtomicReplace) {
  const auto dir = test::scratch_dir("eval_answer_lock");
  const auto path = dir + "/a.jsonl";
  AnswerFile first(path);
  test::expect_invalid_argument([&] { AnswerFile second(path); }, "in use by another process");
  first.append("x");
  first.replace({"b", "c"});
  first.append("d");
  EXPECT_EQ(test::read_file(path), "b\nc\nd\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);  // no temporary left
  test::expect_invalid_argument([&] { AnswerFile second(path); }, "in use");           // the lock moved to the new file
}

// ---- records -----------------------------------------------------------------------------------

TEST(EvalRecords, AnswerAndErrorShapes) {
  Question q;
  q.line = 4;
  q.question_id = "MME/x.png";
  q.text = "Is it red?\nAnswer the question using a single word or phrase.";
  Result r;
  r.text = "Yes";
  r.finish_reason = "eos";
  r.stats.visual_tokens = 64;
  r.stats.vision_ms = 1.5;
  RunSettings run{"tiny", "era", 64, 0.0f};
  const Json a = answer_record(q, r, run, "abc", 2);
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"question_id", "prompt", "text", "answer_id", "model_id", "metadata"}));
  EXPECT_EQ(a["prompt"], q.text);
  EXPECT_EQ(a["metadata"]["visual_tokens"], 64);
  EXPECT_EQ(a["metadata"]["tokens"], 64);
  EXPECT_EQ(a["metadata"]["method"], "era");
  EXPECT_EQ(a["metadata"]["line"], 4);
  EXPECT_EQ(a["metadata"]["batch_size"], 2);
  EXPECT_DOUBLE_EQ(a["metadata"]["timings"]["vision_ms"].get<double>(), 1.5);
  for (const char* t : {"reduce_ms", "prefill_ms", "decode_ms"}) EXPECT_TRUE(a["metadata"]["timings"].contains(t)) << t;
  const auto stored = parse_record(to_line(a), "here");
  EXPECT_EQ(stored.line, 4);
  EXPECT_FALSE(stored.is_error);

  const Json e = error_record(q, "image error: not found");
  EXPECT_EQ(e["line"], 4);
  EXPECT_EQ(e["error"], "image error: not found");
  EXPECT_EQ(e["metadata"]["error"], "image error: not found");
  EXPECT_FALSE(e.contains("text"));
  EXPECT_TRUE(parse_record(to_line(e), "here").is_error);

  test::expect_invalid_argument([] { parse_record("{\"text\": 1}", "f.jsonl line 3"); }, "f.jsonl line 3");
  test::expect_invalid_argument([] { parse_record("nope", "f.jsonl line 4"); }, "not JSON");
  // A generation cut inside a UTF-8 character still gives a valid line.
  r.text = "caf\xC3";
  EXPECT_NO_THROW(Json::parse(to_line(answer_record(q, r, run, "abc", 1))));
}

TEST(EvalRecords, AnswerIdsLookLikeShortuuid) {
  AnswerIdGenerator ids;
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {
    const auto id = ids.next();
    ASSERT_EQ(id.size(), 22u);
    EXPECT_EQ(id.find_first_not_of("23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"), std::string::npos) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 2000u);
  AnswerIdGenerator other;  // another generator (another process) does not repeat the first's ids
  EXPECT_EQ(seen.count(other.next()), 0u);
}

// ---- merge -------------------------------------------------------------------------------------

std::string rec(int64_t line, const std::string& text = "a") {
  return "{\"question_id\": " + std::to_string(100 + line) + ", \"text\": \"" + text +
         "\", \"metadata\": {\"line\": " + std::to_string(line) + "}}\n";
}
std::string err(int64_t line) {
  return "{\"question_id\": null, \"line\": " + std::to_string(line) +
         ", \"error\": \"x\", \"metadata\": {\"line\": " + std::to_string(line) + ", \"error\": \"x\"}}\n";
}

TEST(EvalMerge, ConcatenatesChunksAndChecksLines) {
  const auto dir = test::scratch_dir("eval_merge");
  write_text(dir + "/0.jsonl", rec(0) + rec(1) + rec(2));
  write_text(dir + "/1.jsonl", rec(3) + rec(4));
  write_text(dir + "/2.jsonl", "");  // an empty last chunk (LLaVA's split can leave one)
  const auto s = merge_answer_files({dir + "/0.jsonl", dir + "/1.jsonl", dir + "/2.jsonl"}, dir + "/all.jsonl");
  EXPECT_EQ(s.records, 5);
  EXPECT_EQ(test::read_file(dir + "/all.jsonl"), rec(0) + rec(1) + rec(2) + rec(3) + rec(4));
  // Given in the wrong order, the result is still in question order.
  merge_answer_files({dir + "/1.jsonl", dir + "/0.jsonl"}, dir + "/all2.jsonl");
  EXPECT_EQ(test::read_file(dir + "/all2.jsonl"), test::read_file(dir + "/all.jsonl"));

  test::expect_invalid_argument(
      [&] {
        merge_answer_files({dir + "/0.jsonl", dir + "/0.jsonl"}, dir + "/x.jsonl");
      },
      "question line 0 is answered twice");
  test::expect_invalid_argument([&] { merge_answer_files({dir + "/1.jsonl"}, dir + "/x.jsonl"); },
                                "3 of 5 question line(s) have no record: 0, 1, 2");
  test::expect_invalid_argument(
      [&] {
        merge_answer_files({dir + "/0.jsonl", dir + "/1.jsonl"}, dir + "/x.jsonl", {7, false});
      },
      "2 of 7 question line(s) have no record: 5, 6");
  test::expect_invalid_argument(
      [&] {
        merge_answer_files({dir + "/0.jsonl", dir + "/1.jsonl"}, dir + "/x.jsonl", {4, false});
      },
      "only 4 questions");
  write_text(dir + "/torn.jsonl", rec(3) + "{\"question_id\": 4, \"te");
  test::expect_invalid_argument(
      [&] {
        merge_answer_files({dir + "/0.jsonl", dir + "/torn.jsonl"}, dir + "/x.jsonl");
      },
      "incomplete line");
  EXPECT_FALSE(fs::exists(dir + "/x.jsonl"));

  write_text(dir + "/e.jsonl", err(3) + rec(4));
  const auto kept = merge_answer_files({dir + "/0.jsonl", dir + "/e.jsonl"}, dir + "/with_errors.jsonl");
  EXPECT_EQ(kept.errors, 1);
  EXPECT_EQ(kept.records, 5);
  const auto dropped = merge_answer_files({dir + "/0.jsonl", dir + "/e.jsonl"}, dir + "/no_errors.jsonl", {-1, true});
  EXPECT_EQ(dropped.errors, 1);
  EXPECT_EQ(dropped.records, 4);
  EXPECT_EQ(test::read_file(dir + "/no_errors.jsonl"), rec(0) + rec(1) + rec(2) + rec(4));
}

// ---- progress ----------------------------------------------------------------------------------

TEST(EvalProgress, Formatting) {
  EXPECT_EQ(Progress::format_duration(0), "0:00");
  EXPECT_EQ(Progress::format_duration(65.4), "1:05");
  EXPECT_EQ(Progress::format_duration(3725), "1:02:05");
  EXPECT_EQ(Progress::format_duration(-1), "--:--");
  const auto bar = Progress::format_bar(25, 100, 2, 10.0, 20);
  EXPECT_EQ(bar.substr(0, 22), "[#####...............]");
  EXPECT_NE(bar.find("25/100"), std::string::npos) << bar;
  EXPECT_NE(bar.find("2.50 items/s"), std::string::npos) << bar;
  EXPECT_NE(bar.find("ETA 0:30"), std::string::npos) << bar;
  EXPECT_NE(bar.find("errors 2"), std::string::npos) << bar;
  const auto status = Progress::format_status(0, 100, 0, 0.0);
  EXPECT_NE(status.find("ETA --:--"), std::string::npos) << status;

  // Not a terminal: a line every `log_every` items.
  const auto dir = test::scratch_dir("eval_progress");
  FILE* f = std::fopen((dir + "/log.txt").c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    Progress p(f, 10, ProgressOptions{false, 4, 1e9, 10});
    for (int i = 1; i <= 10; ++i) p.update(i, 0);
    p.message("hello");
    p.finish();
  }
  std::fclose(f);
  const auto log = lines_of(dir + "/log.txt");
  ASSERT_EQ(log.size(), 4u);  // at 4, 8, the message, and the final line
  EXPECT_EQ(log[0].rfind("era_eval: 4/10", 0), 0u) << log[0];
  EXPECT_EQ(log[1].rfind("era_eval: 8/10", 0), 0u) << log[1];
  EXPECT_EQ(log[2], "hello");
  EXPECT_EQ(log[3].rfind("era_eval: 10/10", 0), 0u) << log[3];
}

// ---- the runner over a stand-in backend --------------------------------------------------------

// What the stand-in was asked to do (it is owned, and destroyed, by run_eval).
struct FakeCalls {
  int batches = 0, singles = 0;
  std::vector<uint64_t> seeds;
};

// Answers "<image file name>|<prompt>"; an image whose name contains "bad" fails like a corrupt
// image, and fails a whole batch like Session::generate_batch does.
class FakeBackend : public EvalBackend {
 public:
  explicit FakeBackend(FakeCalls* calls) : calls_(calls) {}
  std::string model_name() const override { return "fake-model"; }
  Result generate(const Request& r) override {
    ++calls_->singles;
    return answer(r);
  }
  std::vector<Result> generate_batch(const std::vector<Request>& rs) override {
    ++calls_->batches;
    std::vector<Result> out;
    for (const auto& r : rs) out.push_back(answer(r));
    return out;
  }

 private:
  Result answer(const Request& r) {
    const std::string image = fs::path(r.images.at(0)).filename().string();
    if (image.find("bad") != std::string::npos) throw Error(ErrorCode::kImage, "cannot decode image " + r.images[0]);
    calls_->seeds.push_back(r.seed);
    Result res;
    res.text = image + "|" + r.prompt;
    res.finish_reason = "eos";
    res.stats.visual_tokens = r.reduction.tokens > 0 ? r.reduction.tokens : 576;
    return res;
  }
  FakeCalls* calls_;
};

struct FakeRun {
  std::string dir;
  EvalConfig config;
  FakeCalls calls;
  int opened = 0;
  EvalSummary run(const EvalHooks& hooks = {}) {
    return run_eval(
        config,
        [this]() {
          ++opened;
          return std::make_unique<FakeBackend>(&calls);
        },
        hooks);
  }
};

FakeRun fake_run(const std::string& name, const std::vector<std::string>& images) {
  FakeRun f;
  f.dir = test::scratch_dir(name);
  std::string questions;
  for (size_t i = 0; i < images.size(); ++i) {
    questions += images[i] == "BROKEN" ? "{\"question_id\": 1, \"image\":\n"
                                       : "{\"question_id\": " + std::to_string(i % 3) + ", \"image\": \"" + images[i] +
                                             "\", \"text\": \"Q" + std::to_string(i) + "\"}\n";
  }
  write_text(f.dir + "/q.jsonl", questions);
  f.config.questions = f.dir + "/q.jsonl";
  f.config.image_folder = f.dir;
  f.config.answers = f.dir + "/out/answers.jsonl";  // the folder is created
  return f;
}

std::vector<Json> records_of(const std::string& path) {
  std::vector<Json> out;
  for (const auto& l : lines_of(path)) out.push_back(Json::parse(l));
  return out;
}
int64_t line_of(const Json& r) { return r.contains("error") ? r["line"].get<int64_t>() : r["metadata"]["line"].get<int64_t>(); }

TEST(EvalRunner, BatchFallbackKeepsOnlyTheBadItemAsError) {
  auto f = fake_run("eval_runner_batch", {"a.png", "b.png", "bad.png", "c.png", "BROKEN", "d.png", "e.png"});
  f.config.batch_size = 3;
  f.config.request.seed = 10;
  const auto s = f.run();
  EXPECT_EQ(s.questions, 7);
  EXPECT_EQ(s.answered, 5);
  EXPECT_EQ(s.errors, 2);
  ASSERT_EQ(f.opened, 1);
  // batches: [a b bad] fails -> 3 singles (1 fails); [c BROKEN d] -> batch of 2 requests; [e] -> single
  EXPECT_EQ(f.calls.batches, 2);
  EXPECT_EQ(f.calls.singles, 4);
  const auto recs = records_of(f.config.answers);
  ASSERT_EQ(recs.size(), 7u);
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(line_of(recs[i]), static_cast<int64_t>(i));
  EXPECT_EQ(recs[0]["text"], "a.png|<image>\nQ0");  // LLaVA's prompt: image placeholder, then the text
  EXPECT_EQ(recs[0]["prompt"], "Q0");
  EXPECT_EQ(recs[0]["model_id"], "fake-model");
  EXPECT_EQ(recs[0]["metadata"]["batch_size"], 1);  // redone alone after the batch failed
  EXPECT_EQ(recs[3]["metadata"]["batch_size"], 2);
  EXPECT_NE(recs[2]["error"].get<std::string>().find("image error: cannot decode image"), std::string::npos) << recs[2];
  EXPECT_EQ(recs[2]["question_id"], 2);
  EXPECT_NE(recs[4]["error"].get<std::string>().find("malformed"), std::string::npos) << recs[4];
  EXPECT_TRUE(recs[4]["question_id"].is_null());
  // The seed of line i is seed + i, however the questions were grouped.
  EXPECT_EQ(f.calls.seeds, (std::vector<uint64_t>{10, 11, 10, 11, 13, 15, 16}));
}

TEST(EvalRunner, ResumeSkipsAnswersRetriesErrorsAndKeepsQuestionOrder) {
  auto f = fake_run("eval_runner_resume", {"a.png", "bad1.png", "b.png", "c.png"});
  auto s = f.run();
  EXPECT_EQ(s.answered, 3);
  EXPECT_EQ(s.errors, 1);
  const auto first = lines_of(f.config.answers);

  // A rerun keeps the answers and tries the failed item again (the stand-in still fails it).
  f.opened = 0;
  s = f.run();
  EXPECT_EQ(f.opened, 1);
  EXPECT_EQ(s.skipped, 3);
  EXPECT_EQ(s.retried, 1);
  EXPECT_EQ(s.errors, 1);
  EXPECT_EQ(s.answered, 0);
  const auto second = lines_of(f.config.answers);
  ASSERT_EQ(second.size(), 4u);
  EXPECT_EQ(second[0], first[0]);
  EXPECT_EQ(second[2], first[2]);  // answers are kept byte for byte
  for (size_t i = 0; i < second.size(); ++i) EXPECT_EQ(line_of(Json::parse(second[i])), static_cast<int64_t>(i));

  // Once the item succeeds its answer goes back in its place (the file is rewritten in order).
  std::string q = test::read_file(f.config.questions);
  q.replace(q.find("bad1.png"), 8, "good.png");
  write_text(f.config.questions, q);
  s = f.run();
  EXPECT_EQ(s.answered, 1);
  EXPECT_EQ(s.errors, 0);
  const auto third = records_of(f.config.answers);
  ASSERT_EQ(third.size(), 4u);
  for (size_t i = 0; i < third.size(); ++i) EXPECT_EQ(line_of(third[i]), static_cast<int64_t>(i));
  EXPECT_EQ(third[1]["text"], "good.png|<image>\nQ1");

  // All answered: the model is not loaded at all.
  f.opened = 0;
  s = f.run();
  EXPECT_EQ(f.opened, 0);
  EXPECT_EQ(s.skipped, 4);
}

TEST(EvalRunner, RefusesAnswersOfAnotherRun) {
  auto f = fake_run("eval_runner_refuse", {"a.png", "b.png", "c.png", "d.png"});
  f.config.num_chunks = 2;
  f.config.chunk_idx = 0;
  f.run();
  f.config.chunk_idx = 1;  // the same file for another chunk
  test::expect_invalid_argument([&] { f.run(); }, "not in this run's chunk 1 of 2");
  f.config.chunk_idx = 0;
  f.config.request.reduction.method = "era";
  f.config.request.reduction.tokens = 64;
  test::expect_invalid_argument([&] { f.run(); }, "was made with --method \"full\"");
  f.config.request.reduction.method = "full";
  f.config.request.reduction.tokens = 0;
  write_text(f.config.questions,
             "{\"question_id\": 50, \"image\": \"a.png\", \"text\": \"other\"}\n" + test::read_file(f.config.questions));
  test::expect_invalid_argument([&] { f.run(); }, "another question file");
  // Settings that every request would fail with stop the run before anything is written.
  auto g = fake_run("eval_runner_settings", {"a.png"});
  g.config.request.reduction.method = "nope";
  EXPECT_THROW(g.run(), Error);
  g.config.request.reduction.method = "full";
  g.config.request.top_p = 2.0f;
  test::expect_invalid_argument([&] { g.run(); }, "top-p");
  EXPECT_FALSE(fs::exists(g.config.answers));
  g.config.request.top_p = 1.0f;
  g.config.image_folder = g.dir + "/missing";
  test::expect_invalid_argument([&] { g.run(); }, "is not a folder");
}

TEST(EvalRunner, StopsBetweenBatchesWhenAsked) {
  auto f = fake_run("eval_runner_stop", {"a.png", "b.png", "c.png", "d.png", "e.png"});
  f.config.batch_size = 2;
  std::atomic<bool> stop{false};
  EvalHooks hooks;
  hooks.stop = &stop;
  std::vector<int64_t> progress;
  hooks.on_progress = [&](int64_t done, int64_t total, int64_t) {
    progress.push_back(done);
    EXPECT_EQ(total, 5);
    if (done >= 2) stop = true;
  };
  auto s = f.run(hooks);
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(s.answered, 2);
  EXPECT_EQ(progress, (std::vector<int64_t>{2}));
  s = f.run();
  EXPECT_FALSE(s.interrupted);
  EXPECT_EQ(s.skipped, 2);
  EXPECT_EQ(s.answered, 3);
  EXPECT_EQ(records_of(f.config.answers).size(), 5u);
}

TEST(EvalRunner, SeveralRunsShareOneModelAndCountRealVisualTokens) {
  auto f = fake_run("eval_runner_shared", {"a.png", "b.png", "bad.png", "c.png"});
  const auto runs = plan_runs({"full", "era"}, {8, 16}, f.dir + "/runs");
  ASSERT_EQ(runs.size(), 3u);
  int opened = 0;
  const auto open = shared_backend([&]() {
    ++opened;
    return std::make_unique<FakeBackend>(&f.calls);
  });
  const auto run_all = [&]() {
    std::vector<EvalSummary> out;
    for (const auto& r : runs) {
      EvalConfig c = f.config;
      c.answers = r.answers;
      c.request.reduction.method = r.method;
      c.request.reduction.tokens = r.tokens;
      out.push_back(run_eval(c, open, {}));
    }
    return out;
  };
  auto s = run_all();
  EXPECT_EQ(opened, 1);  // one model for the three runs
  ASSERT_EQ(s.size(), 3u);
  // The stand-in reports its budget (576 without one) as the decoder's count; the error record has none.
  const std::vector<double> expected = {576, 8, 16};
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].answered, 3) << i;
    EXPECT_EQ(s[i].visual_token_answers, 3) << i;
    EXPECT_DOUBLE_EQ(s[i].visual_tokens_mean, expected[i]) << i;
    const auto recs = records_of(runs[i].answers);
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[0]["metadata"]["method"], runs[i].method);
    EXPECT_EQ(recs[0]["metadata"]["tokens"], runs[i].tokens);
    EXPECT_EQ(recs[0]["metadata"]["visual_tokens"], static_cast<int64_t>(expected[i]));
  }
  // A rerun: each run resumes on its own file; the kept answers still count in the mean.
  std::string q = test::read_file(f.config.questions);
  q.replace(q.find("bad.png"), 7, "fix.png");
  write_text(f.config.questions, q);
  s = run_all();
  EXPECT_EQ(opened, 1);  // the same model still
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].skipped, 3) << i;
    EXPECT_EQ(s[i].answered, 1) << i;
    EXPECT_EQ(s[i].visual_token_answers, 4) << i;
    EXPECT_DOUBLE_EQ(s[i].visual_tokens_mean, expected[i]) << i;
  }
}

TEST(EvalRunPlan, EveryMethodAtEveryBudgetAndFullOnce) {
  const auto runs = plan_runs({"era", "full", "era:dep+btr"}, {64, 128}, "out");
  std::vector<std::string> got;
  for (const auto& r : runs) got.push_back(r.method + "@" + std::to_string(r.tokens) + "=" + r.answers);
  EXPECT_EQ(got,
            (std::vector<std::string>{"era@64=out/era_64.jsonl", "era@128=out/era_128.jsonl", "full@0=out/full.jsonl",
                                      "era:dep+btr@64=out/era-dep+btr_64.jsonl", "era:dep+btr@128=out/era-dep+btr_128.jsonl"}));
  EXPECT_EQ(runs[0].label(), "era, 64 tokens");
  EXPECT_EQ(runs[2].label(), "full");
  // No budget: one run per method, named by the method alone.
  const auto plain = plan_runs({"era"}, {}, "d");
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].tokens, 0);
  EXPECT_EQ(plain[0].answers, "d/era.jsonl");
  EXPECT_EQ(run_file_name("a/b c:d", 8), "a-b-c-d_8.jsonl");

  test::expect_invalid_argument([] { plan_runs({}, {64}, "d"); }, "no method");
  test::expect_invalid_argument([] { plan_runs({"era", ""}, {64}, "d"); }, "empty method");
  test::expect_invalid_argument([] { plan_runs({"era", "era"}, {64}, "d"); }, "era twice");
  test::expect_invalid_argument([] { plan_runs({"era"}, {64, 64}, "d"); }, "64 twice");
  test::expect_invalid_argument([] { plan_runs({"era"}, {-1}, "d"); }, ">= 0");
  test::expect_invalid_argument([] { plan_runs({"era:dep", "era-dep"}, {64}, "d"); }, "would both write era-dep_64.jsonl");
}

}  // namespace
}  // namespace era::eval
