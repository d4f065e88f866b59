// era_eval end to end on the tiny bundle: LLaVA-format answers with metadata, a run killed with
// SIGKILL and resumed, bad items as error records, sharding + merge, batching, ERA budgets.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_text(const std::string& path, const std::string& text) { test::write_file(path, text); }

std::vector<std::string> lines_of(const std::string& path) { return test::read_lines(path); }

// A scratch folder with images/ (the two samples, a corrupt PNG and a truncated JPEG).
struct Workspace {
  std::string dir, images;
  explicit Workspace(const std::string& name) : dir(test::scratch_dir(name)), images(dir + "/images") {
    fs::create_directories(images);
    fs::copy_file(test::source_dir() + "/tests/data/sample.png", images + "/sample.png");
    fs::copy_file(test::source_dir() + "/tests/data/sample.jpg", images + "/sample.jpg");
    write_text(images + "/corrupt.png", "\x89PNG\r\n\x1a\n this is not really a PNG");
    const std::string jpg = test::read_file(images + "/sample.jpg");
    write_text(images + "/truncated.jpg", jpg.substr(0, jpg.size() / 3));
  }
  // n good questions over both images; question_id repeats (as in MME/TextVQA) to show that
  // lines, not ids, are the key.
  std::string questions(const std::string& name, int n) const {
    std::string text;
    for (int i = 0; i < n; ++i) {
      text +=
          json{{"question_id", "q" + std::to_string(i / 2)},
               {"image", i % 2 ? "sample.jpg" : "sample.png"},
               {"text", "Question " + std::to_string(i) + ": what is shown?\nAnswer the question using a single word or phrase."},
               {"category", "default"}}
              .dump() +
          "\n";
    }
    write_text(dir + "/" + name, text);
    return dir + "/" + name;
  }
  std::string eval(const std::string& questions, const std::string& answers, const std::string& args = "") const {
    return test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + questions + " --image-folder " + images +
           " --answers " + answers + " " + args;
  }
};

std::vector<json> records_of(const std::string& path) {
  std::vector<json> out;
  for (const auto& l : lines_of(path)) out.push_back(json::parse(l));
  return out;
}
int64_t line_of(const json& r) { return r.contains("error") ? r["line"].get<int64_t>() : r["metadata"]["line"].get<int64_t>(); }

// Every question line 0..n-1 has exactly one record, in order, and the file ends with a newline.
void expect_complete(const std::string& path, int n) {
  const std::string content = test::read_file(path);
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content.back(), '\n');
  const auto recs = records_of(path);  // throws (fails the test) on a torn line
  ASSERT_EQ(recs.size(), static_cast<size_t>(n)) << content;
  for (int i = 0; i < n; ++i) EXPECT_EQ(line_of(recs[static_cast<size_t>(i)]), i);
}

std::map<int64_t, std::string> texts_by_line(const std::string& path) {
  std::map<int64_t, std::string> out;
  for (const auto& r : records_of(path)) out[line_of(r)] = r.contains("text") ? r["text"].get<std::string>() : "<error>";
  return out;
}

TEST(EraEval, AnswersInLlavaFormat) {
  Workspace ws("era_eval_e2e");
  const auto q = ws.questions("q.jsonl", 6);
  const auto out = ws.dir + "/answers/llava-tiny.jsonl";
  const auto r = test::run_command(ws.eval(q, out, "-n 8 --model-id llava-tiny"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("6 answered, 0 skipped (already answered), 0 errors"), std::string::npos) << r.err;
  expect_complete(out, 6);
  const auto questions = lines_of(q);
  std::set<std::string> ids;
  const auto recs = records_of(out);
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& a = recs[i];
    const auto qj = json::parse(questions[i]);
    std::vector<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::string>{"answer_id", "metadata", "model_id", "prompt", "question_id", "text"}));
    EXPECT_EQ(a["question_id"], qj["question_id"]);
    EXPECT_EQ(a["prompt"], qj["text"]);  // verbatim, without "<image>\n"
    EXPECT_TRUE(a["text"].is_string());
    EXPECT_EQ(a["model_id"], "llava-tiny");
    ids.insert(a["answer_id"].get<std::string>());
    const auto& m = a["metadata"];
    EXPECT_EQ(m["method"], "full");
    EXPECT_EQ(m["tokens"], 0);
    EXPECT_EQ(m["visual_tokens"], 576);
    EXPECT_EQ(m["line"], i);
    for (const char* t : {"vision_ms", "reduce_ms", "prefill_ms", "decode_ms"}) {
      ASSERT_TRUE(m["timings"].contains(t)) << t;
      EXPECT_GE(m["timings"][t].get<double>(), 0.0) << t;
    }
    EXPECT_LE(m["generated_tokens"].get<int64_t>(), 8);
  }
  EXPECT_EQ(ids.size(), 6u);

  // The answers are what era_infer gives for the same question (same template, greedy).
  const auto infer =
      test::run_command(test::era_infer_path() + " -m " + test::bundle_dir() + " --image " + ws.images + "/sample.jpg -p '" +
                        json::parse(questions[1])["text"].get<std::string>() + "' -n 8 --json");
  ASSERT_EQ(infer.exit_code, 0) << infer.err;
  EXPECT_EQ(json::parse(infer.out)["answer"], recs[1]["text"]);

  // Rerun: nothing to do.
  const auto again = test::run_command(ws.eval(q, out, "-n 8 --model-id llava-tiny"));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("0 answered, 6 skipped"), std::string::npos) << again.err;
  expect_complete(out, 6);
}

// SIGKILL part-way, rerun: every question answered exactly once, no torn line, earlier answers kept.
TEST(EraEval, KilledRunResumesWithoutLossOrDuplicates) {
  Workspace ws("era_eval_kill");
  const int n = 12;
  const auto q = ws.questions("q.jsonl", n);
  const auto out = ws.dir + "/answers.jsonl";
  const std::vector<std::string> args = {test::era_eval_path(),
                                         "-m",
                                         test::bundle_dir(),
                                         "--questions",
                                         q,
                                         "--image-folder",
                                         ws.images,
                                         "--answers",
                                         out,
                                         "-n",
                                         "16",
                                         "--ignore-eos"};
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  size_t seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string content = test::read_file(out);
    seen = static_cast<size_t>(std::count(content.begin(), content.end(), '\n'));
    if (seen >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "era_eval finished before it could be killed; make the run longer";
  ASSERT_GE(seen, 3u);
  const auto before = lines_of(out);
  ASSERT_LT(before.size(), static_cast<size_t>(n)) << "killed too late to test resuming";

  const std::string cmd = test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + q + " --image-folder " +
                          ws.images + " --answers " + out + " -n 16 --ignore-eos";
  const auto r = test::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_complete(out, n);
  const auto after = lines_of(out);
  // Complete lines written before the kill are kept byte for byte (a torn one is redone).
  for (size_t i = 0; i + 1 < before.size(); ++i) EXPECT_EQ(after[i], before[i]);
  const auto skipped = std::to_string(before.size() - 1);
  EXPECT_TRUE(r.err.find(std::to_string(before.size()) + " skipped") != std::string::npos ||
              r.err.find(skipped + " skipped") != std::string::npos)
      << r.err;
  // Same answers as an uninterrupted run.
  const auto ref = ws.dir + "/ref.jsonl";
  ASSERT_EQ(test::run_command(cmd.substr(0, cmd.find(" --answers ")) + " --answers " + ref + " -n 16 --ignore-eos").exit_code, 0);
  EXPECT_EQ(texts_by_line(out), texts_by_line(ref));
}

// The kill landing inside a write: an incomplete last line is cut and its question redone.
// Video questions: a "video" field (a folder of frames under --image-folder) and --frames; a
// missing video is that question's error record, the others are answered.
TEST(EraEval, VideoQuestionsWithFrames) {
  Workspace ws("eval_video");
  fs::create_directories(ws.images + "/clip");
  for (int k = 0; k < 4; ++k) fs::copy_file(ws.images + "/sample.png", ws.images + "/clip/f" + std::to_string(k) + ".png");
  const std::string q = ws.dir + "/video.jsonl";
  write_text(q, json{{"question_id", 1}, {"video", "clip"}, {"text", "What happens?"}}.dump() + "\n" +
                    json{{"question_id", 2}, {"video", "nope"}, {"text", "What happens?"}}.dump() + "\n" +
                    json{{"question_id", 3}, {"text", "No media."}}.dump() + "\n");
  const std::string out = ws.dir + "/answers.jsonl";
  const auto r = test::run_command(test::era_eval_path() + " -m " + test::onevision_bundle_dir() + " --questions " + q +
                                   " --image-folder " + ws.images + " --answers " + out + " -n 2 --frames 2");
  EXPECT_EQ(r.exit_code, 3) << r.err;  // some items failed, their records written
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 3u);
  std::map<int, json> by_id;
  for (const auto& l : lines) {
    const auto j = json::parse(l);
    by_id[j["question_id"].get<int>()] = j;
  }
  EXPECT_FALSE(by_id[1].contains("error")) << by_id[1].dump();
  EXPECT_EQ(by_id[1]["metadata"]["visual_tokens"], 2 * 196 + 1);
  EXPECT_NE(by_id[2].value("error", "").find("nope"), std::string::npos) << by_id[2].dump();
  EXPECT_NE(by_id[3].value("error", "").find("no \"image\" or \"video\""), std::string::npos) << by_id[3].dump();
}

TEST(EraEval, TornLastLineIsRepaired) {
  Workspace ws("era_eval_torn");
  const auto q = ws.questions("q.jsonl", 4);
  const auto out = ws.dir + "/answers.jsonl";
  ASSERT_EQ(test::run_command(ws.eval(q, out, "-n 4")).exit_code, 0);
  auto lines = lines_of(out);
  const std::string last = lines.back();
  lines.pop_back();
  std::string torn;
  for (const auto& l : lines) torn += l + "\n";
  torn += last.substr(0, last.size() / 2);
  write_text(out, torn);
  const auto r = test::run_command(ws.eval(q, out, "-n 4"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("removed an incomplete last line"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 answered, 3 skipped"), std::string::npos) << r.err;
  expect_complete(out, 4);
  EXPECT_EQ(json::parse(lines_of(out)[3])["text"], json::parse(last)["text"]);
}

TEST(EraEval, BadItemsBecomeErrorRecords) {
  Workspace ws("era_eval_bad");
  const std::string q = ws.dir + "/q.jsonl";
  write_text(q,
             "{\"question_id\": 0, \"image\": \"sample.png\", \"text\": \"Good one?\"}\n"
             "{\"question_id\": 1, \"image\": \"sample.png\", \"text\": \"broken\"\n"          // malformed JSON
             "{\"question_id\": 2, \"image\": \"missing.png\", \"text\": \"Where is it?\"}\n"  // missing image
             "{\"question_id\": 3, \"image\": \"corrupt.png\", \"text\": \"Corrupt?\"}\n"      // corrupt image
             "{\"question_id\": 4, \"image\": \"sample.jpg\", \"text\": \"Good two?\"}\n");
  const auto out = ws.dir + "/answers.jsonl";
  const auto r = test::run_command(ws.eval(q, out, "-n 4"));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("2 answered, 0 skipped (already answered), 3 errors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error records"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing.png"), std::string::npos) << r.err;  // each failure is reported as it happens
  expect_complete(out, 5);
  const auto recs = records_of(out);
  EXPECT_TRUE(recs[0].contains("text"));
  EXPECT_TRUE(recs[4].contains("text"));
  for (const int i : {1, 2, 3}) {
    const auto& e = recs[static_cast<size_t>(i)];
    ASSERT_TRUE(e.contains("error")) << e;
    EXPECT_FALSE(e.contains("text")) << e;
    EXPECT_EQ(e["line"], i);
    EXPECT_EQ(e["metadata"]["error"], e["error"]);
  }
  EXPECT_TRUE(recs[1]["question_id"].is_null());
  EXPECT_NE(recs[1]["error"].get<std::string>().find("malformed"), std::string::npos) << recs[1];
  EXPECT_EQ(recs[2]["question_id"], 2);
  EXPECT_NE(recs[2]["error"].get<std::string>().find("missing.png"), std::string::npos) << recs[2];
  EXPECT_NE(recs[3]["error"].get<std::string>().find("corrupt.png"), std::string::npos) << recs[3];

  // Rerun: answers kept, the three failures tried again (and fail again), still one record each.
  const auto again = test::run_command(ws.eval(q, out, "-n 4"));
  EXPECT_EQ(again.exit_code, 3) << again.err;
  EXPECT_NE(again.err.find("0 answered, 2 skipped (already answered), 3 errors"), std::string::npos) << again.err;
  expect_complete(out, 5);

  // The missing image appears: its question is answered and put in its place.
  fs::copy_file(ws.images + "/sample.png", ws.images + "/missing.png");
  const auto fixed = test::run_command(ws.eval(q, out, "-n 4"));
  EXPECT_EQ(fixed.exit_code, 3) << fixed.err;
  EXPECT_NE(fixed.err.find("1 answered, 2 skipped (already answered), 2 errors"), std::string::npos) << fixed.err;
  expect_complete(out, 5);
  EXPECT_TRUE(records_of(out)[2].contains("text"));
}

TEST(EraEval, TwoChunksMergedEqualOneRun) {
  Workspace ws("era_eval_chunks");
  const auto q = ws.questions("q.jsonl", 7);
  const auto single = ws.dir + "/single.jsonl";
  ASSERT_EQ(test::run_command(ws.eval(q, single, "-n 6")).exit_code, 0);
  for (int k = 0; k < 2; ++k) {
    const auto r = test::run_command(
        ws.eval(q, ws.dir + "/chunk" + std::to_string(k) + ".jsonl", "-n 6 --num-chunks 2 --chunk-idx " + std::to_string(k)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(lines_of(ws.dir + "/chunk0.jsonl").size(), 4u);  // ceil(7 / 2)
  EXPECT_EQ(lines_of(ws.dir + "/chunk1.jsonl").size(), 3u);
  const auto merged = ws.dir + "/merged.jsonl";
  const auto m = test::run_command(test::era_eval_path() + " merge --inputs " + ws.dir + "/chunk0.jsonl " + ws.dir +
                                   "/chunk1.jsonl --output " + merged + " --questions " + q);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  expect_complete(merged, 7);
  EXPECT_EQ(texts_by_line(merged), texts_by_line(single));
  const auto recs = records_of(merged), ref = records_of(single);
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(recs[i]["question_id"], ref[i]["question_id"]);

  // A missing chunk, and a chunk file given to the wrong chunk, are refused with a clear error.
  const auto missing = test::run_command(test::era_eval_path() + " merge --inputs " + ws.dir + "/chunk0.jsonl --output " +
                                         ws.dir + "/bad.jsonl --questions " + q);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("3 of 7 question line(s) have no record: 4, 5, 6"), std::string::npos) << missing.err;
  const auto dup = test::run_command(test::era_eval_path() + " merge --inputs " + ws.dir + "/chunk0.jsonl " + single +
                                     " --output " + ws.dir + "/bad.jsonl");
  EXPECT_EQ(dup.exit_code, 2);
  EXPECT_NE(dup.err.find("answered twice"), std::string::npos) << dup.err;
  const auto wrong = test::run_command(ws.eval(q, ws.dir + "/chunk0.jsonl", "-n 6 --num-chunks 2 --chunk-idx 1"));
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("not in this run's chunk 1 of 2"), std::string::npos) << wrong.err;
}

TEST(EraEval, BatchedEqualsOneByOne) {
  Workspace ws("era_eval_batch");
  // Six good questions and a missing image inside the first batch: the batch falls back to one
  // request at a time and only that question fails.
  std::string text = test::read_file(ws.questions("good.jsonl", 6));
  text.insert(text.find('\n', text.find('\n') + 1) + 1,
              "{\"question_id\": \"gone\", \"image\": \"gone.png\", \"text\": \"Is it there?\"}\n");
  const std::string q = ws.dir + "/q.jsonl";
  write_text(q, text);
  const auto one = ws.dir + "/b1.jsonl", four = ws.dir + "/b4.jsonl";
  const auto r1 = test::run_command(ws.eval(q, one, "-n 10 --ignore-eos"));
  const auto r4 = test::run_command(ws.eval(q, four, "-n 10 --ignore-eos --batch-size 4"));
  EXPECT_EQ(r1.exit_code, 3) << r1.err;
  EXPECT_EQ(r4.exit_code, 3) << r4.err;
  expect_complete(one, 7);
  expect_complete(four, 7);
  EXPECT_EQ(texts_by_line(four), texts_by_line(one));
  const auto recs = records_of(four);
  EXPECT_TRUE(recs[2].contains("error"));
  EXPECT_EQ(recs[0]["metadata"]["batch_size"], 1);  // first batch redone one by one
  EXPECT_EQ(recs[4]["metadata"]["batch_size"], 3);  // second batch: lines 4..6
}

TEST(EraEval, EraBudgetInMetadata) {
  Workspace ws("era_eval_era");
  const auto q = ws.questions("q.jsonl", 2);
  const auto out = ws.dir + "/era.jsonl";
  const auto r = test::run_command(ws.eval(q, out, "-n 4 --method era --tokens 64"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& a : records_of(out)) {
    EXPECT_EQ(a["metadata"]["method"], "era");
    EXPECT_EQ(a["metadata"]["tokens"], 64);
    EXPECT_EQ(a["metadata"]["visual_tokens"], 64);
  }
  // The same file cannot be resumed with other settings.
  const auto other = test::run_command(ws.eval(q, out, "-n 4 --method full"));
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("was made with --method \"era\" --tokens 64"), std::string::npos) << other.err;
}

// Several methods and budgets side by side: one answers file per run, one model load, the real
// visual-token count in every record, and each run resumed on its own.
TEST(EraEval, MethodsAndBudgetsSideBySide) {
  Workspace ws("era_eval_side_by_side");
  const auto q = ws.questions("q.jsonl", 3);
  const auto dir = ws.dir + "/runs";
  const std::string cmd = test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + q + " --image-folder " +
                          ws.images + " --answers-dir " + dir + " -n 2 --methods full,era --tokens 8,16";
  const auto count = [](const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  const auto r = test::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "loading the model"), 1u) << r.err;  // one load for the three runs
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"full.jsonl", "era_8.jsonl", "era_16.jsonl"}));  // full once, not per budget
  const std::map<std::string, std::pair<int64_t, int64_t>> expected = {                    // file -> (nominal, real) tokens
                                                                       {"full.jsonl", {0, 576}},
                                                                       {"era_8.jsonl", {8, 8}},
                                                                       {"era_16.jsonl", {16, 16}}};
  for (const auto& [file, tokens] : expected) {
    expect_complete(dir + "/" + file, 3);
    for (const auto& a : records_of(dir + "/" + file)) {
      EXPECT_EQ(a["metadata"]["method"], file == "full.jsonl" ? "full" : "era") << file;
      EXPECT_EQ(a["metadata"]["tokens"], tokens.first) << file;
      EXPECT_EQ(a["metadata"]["visual_tokens"], tokens.second) << file;  // what the decoder really saw
    }
  }
  EXPECT_NE(r.err.find("era_eval: era, 8 tokens: done: 3 answered, 0 skipped (already answered), 0 errors; 3 questions "
                       "in this chunk; mean visual tokens 8.0 -> " +
                       dir + "/era_8.jsonl"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("era_eval: full: done: 3 answered"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mean visual tokens 576.0"), std::string::npos) << r.err;

  // One run left unfinished (its last record lost): a rerun finishes that run only.
  const auto era16 = dir + "/era_16.jsonl";
  const auto before = texts_by_line(era16);
  auto lines = lines_of(era16);
  lines.pop_back();
  std::string kept;
  for (const auto& l : lines) kept += l + "\n";
  write_text(era16, kept);
  const auto again = test::run_command(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(count(again.err, "loading the model"), 1u) << again.err;
  EXPECT_NE(again.err.find("era, 16 tokens: done: 1 answered, 2 skipped"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("era, 8 tokens: done: 0 answered, 3 skipped"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("full: done: 0 answered, 3 skipped"), std::string::npos) << again.err;
  expect_complete(era16, 3);
  EXPECT_EQ(texts_by_line(era16), before);  // greedy: the redone answer is the same
  // All done: nothing is answered again and no file changes. (The model is still loaded, once:
  // the bundle is validated before any answers file is touched.)
  const std::string era16_before = test::read_file(era16);
  const auto done = test::run_command(cmd);
  ASSERT_EQ(done.exit_code, 0) << done.err;
  EXPECT_EQ(count(done.err, "loading the model"), 1u) << done.err;
  EXPECT_EQ(count(done.err, " 0 answered, 3 skipped"), 3u) << done.err;
  EXPECT_EQ(test::read_file(era16), era16_before);
}

// Issue 6's comparison run: every competing method next to full and ERA, on LLaVA-1.5 and NeXT.
// Each record carries the real number of visual tokens the decoder saw; on LLaVA-1.5 that is the
// budget for every method but DART (official count 4 + 8*floor(B/8)); the tiny models have two
// decoder layers, so the in-decoder methods prune after layer 1.
void run_every_method(const std::string& bundle, int64_t tokens, bool next) {
  Workspace ws(next ? "era_eval_every_method_next" : "era_eval_every_method");
  const auto q = ws.questions("q.jsonl", 2);
  const auto dir = ws.dir + "/runs";
  const std::vector<std::string> methods = {"full", "era",    "divprune", "visionzip", "cdpruner",
                                            "pool", "random", "fastv",    "dart"};
  std::string list;
  for (const auto& m : methods) list += (list.empty() ? "" : ",") + m;
  const auto r = test::run_command(test::era_eval_path() + " -m " + bundle + " --questions " + q + " --image-folder " +
                                   ws.images + " --answers-dir " + dir + " -n 2 --methods " + list + " --tokens " +
                                   std::to_string(tokens) + " --method-set fastv_layer=1 --method-set dart_layer=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int64_t, int64_t> full_tokens;  // question line -> unreduced count
  for (const auto& a : records_of(dir + "/full.jsonl")) full_tokens[a["metadata"]["line"]] = a["metadata"]["visual_tokens"];
  ASSERT_EQ(full_tokens.size(), 2u);
  for (const auto& m : methods) {
    if (m == "full") continue;
    const auto file = dir + "/" + m + "_" + std::to_string(tokens) + ".jsonl";
    expect_complete(file, 2);
    for (const auto& a : records_of(file)) {
      ASSERT_FALSE(a.contains("error")) << m << ": " << a.dump();
      EXPECT_EQ(a["metadata"]["method"], m);
      EXPECT_EQ(a["metadata"]["tokens"], tokens) << m;
      const int64_t real = a["metadata"]["visual_tokens"];
      const int64_t full = full_tokens.at(a["metadata"]["line"]);
      if (!next) {
        EXPECT_EQ(real, m == "dart" ? 4 + 8 * (tokens / 8) : tokens) << m;
      } else {  // NeXT: newlines and per-crop budgets make the count exceed the nominal budget a little
        EXPECT_GE(real, tokens * 9 / 10) << m;
        EXPECT_LT(real, full / 4) << m;
      }
    }
  }
}

TEST(EraEval, EveryCompetingMethodSideBySideOnLlava15) { run_every_method(test::bundle_dir(), 64, false); }
TEST(EraEval, EveryCompetingMethodSideBySideOnLlavaNext) { run_every_method(test::next_bundle_dir(), 160, true); }

TEST(EraEval, SideBySideUsageErrorsComeBeforeAnyWork) {
  Workspace ws("era_eval_side_by_side_usage");
  const auto q = ws.questions("q.jsonl", 1);
  const std::string base =
      test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + q + " --image-folder " + ws.images + " -n 1 ";
  // An unknown method anywhere in the list stops everything before the first run.
  const auto unknown = test::run_command(base + "--answers-dir " + ws.dir + "/runs --methods full,nope --tokens 8");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err.rfind("era_eval: error: ", 0), 0u) << unknown.err;
  EXPECT_NE(unknown.err.find("nope"), std::string::npos) << unknown.err;
  EXPECT_FALSE(fs::exists(ws.dir + "/runs"));
  // Several runs need a folder; one file cannot hold them.
  const auto one_file = test::run_command(base + "--answers " + ws.dir + "/a.jsonl --methods full,era --tokens 8");
  EXPECT_EQ(one_file.exit_code, 2);
  EXPECT_NE(one_file.err.find("need --answers-dir"), std::string::npos) << one_file.err;
  const auto two_budgets = test::run_command(base + "--answers " + ws.dir + "/a.jsonl --method era --tokens 8,16");
  EXPECT_EQ(two_budgets.exit_code, 2);
  EXPECT_NE(two_budgets.err.find("need --answers-dir"), std::string::npos) << two_budgets.err;
  const auto twice = test::run_command(base + "--answers-dir " + ws.dir + "/runs --methods era,era --tokens 8");
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("lists era twice"), std::string::npos) << twice.err;
  EXPECT_FALSE(fs::exists(ws.dir + "/a.jsonl"));
  EXPECT_FALSE(fs::exists(ws.dir + "/runs"));
}

TEST(EraEval, UsageErrorsExitWithTwo) {
  Workspace ws("era_eval_usage");
  const auto q = ws.questions("q.jsonl", 1);
  const auto missing = test::run_command(test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + q);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("missing --image-folder, --answers"), std::string::npos) << missing.err;
  const auto bad_flag = test::run_command(ws.eval(q, ws.dir + "/a.jsonl", "--no-such-flag"));
  EXPECT_EQ(bad_flag.exit_code, 2);
  const auto bundle = test::run_command(test::era_eval_path() + " -m " + ws.dir + "/nowhere --questions " + q +
                                        " --image-folder " + ws.images + " --answers " + ws.dir + "/a.jsonl");
  EXPECT_EQ(bundle.exit_code, 2);
  EXPECT_NE(bundle.err.find("era_eval: error: model bundle not found"), std::string::npos) << bundle.err;
  const auto method = test::run_command(ws.eval(q, ws.dir + "/b.jsonl", "--method nope"));
  EXPECT_EQ(method.exit_code, 2);
  EXPECT_FALSE(fs::exists(ws.dir + "/b.jsonl"));  // refused before anything was written
  const auto questions = test::run_command(ws.eval(ws.dir + "/none.jsonl", ws.dir + "/c.jsonl"));
  EXPECT_EQ(questions.exit_code, 2);
  EXPECT_NE(questions.err.find("none.jsonl"), std::string::npos) << questions.err;
}

}  // namespace
}  // namespace era

namespace era {
namespace {

// The whole loop a researcher runs: era_eval on a small POPE-shaped question set (two splits),
// then era_score on its answers file, for the full model and ERA, then the retention table.
TEST(EraEvalThenScore, PopeAnswersScoreAndRetention) {
  Workspace ws("eval_then_score");
  std::string questions, labels_random, labels_popular;
  for (int i = 0; i < 6; ++i) {
    const std::string split = i < 3 ? "random" : "popular";
    questions += json{{"question_id", i},
                      {"image", i % 2 ? "sample.jpg" : "sample.png"},
                      {"text", "Is there a house in the image?\nAnswer the question using a single word or phrase."},
                      {"category", split}}
                     .dump() +
                 "\n";
    (i < 3 ? labels_random : labels_popular) += json{{"question_id", i}, {"label", i % 2 ? "yes" : "no"}}.dump() + "\n";
  }
  write_text(ws.dir + "/q.jsonl", questions);
  fs::create_directories(ws.dir + "/pope");
  write_text(ws.dir + "/pope/coco_pope_random.json", labels_random);
  write_text(ws.dir + "/pope/coco_pope_popular.json", labels_popular);

  for (const std::string method : {"full", "era"}) {
    const auto answers = ws.dir + "/" + method + ".jsonl";
    const auto run = test::run_command(ws.eval(ws.dir + "/q.jsonl", answers, "-n 4 --method " + method + " --tokens 64"));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto score = test::run_command(test::era_score_path() + " --benchmark pope --answers " + answers + " --annotations " +
                                         ws.dir + "/pope --questions " + ws.dir + "/q.jsonl --json " + ws.dir + "/" + method +
                                         "_results.json --method " + method);
    ASSERT_EQ(score.exit_code, 0) << score.err;
    const auto results = json::parse(test::read_file(ws.dir + "/" + method + "_results.json"));
    ASSERT_TRUE(results["benchmarks"].contains("pope")) << results.dump();
  }
  const auto table = test::run_command(test::era_score_path() + " retention --reference " + ws.dir + "/full_results.json" +
                                       " --results " + ws.dir + "/era_results.json");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Avg"), std::string::npos) << table.out;
}

// What era_eval writes, era_score reads: a malformed question line becomes an error record with
// "question_id": null, which scoring skips and counts like any other error record.
TEST(EraEvalThenScore, ErrorRecordsOfMalformedLinesAreSkippedAndCounted) {
  Workspace ws("eval_then_score_errors");
  const std::string q = ws.dir + "/q.jsonl";
  write_text(q,
             "{\"question_id\": 0, \"image\": \"sample.png\", \"text\": \"Good one?\"}\n"
             "{\"question_id\": 1, \"image\": \"sample.png\", \"text\": \"broken\"\n"  // malformed JSON
             "{\"question_id\": 2, \"image\": \"missing.png\", \"text\": \"Where is it?\"}\n"
             "{\"question_id\": 3, \"image\": \"sample.jpg\", \"text\": \"Good two?\"}\n");
  const auto answers = ws.dir + "/answers.jsonl";
  const auto run = test::run_command(ws.eval(q, answers, "-n 4"));
  ASSERT_EQ(run.exit_code, 3) << run.err;
  ASSERT_TRUE(records_of(answers)[1]["question_id"].is_null());
  json gqa = json::object();
  for (const char* id : {"0", "1", "2", "3"}) gqa[id] = {{"answer", "yes"}, {"isBalanced", true}, {"types", json::object()}};
  write_text(ws.dir + "/gqa.json", gqa.dump());
  const auto score = test::run_command(test::era_score_path() + " --benchmark gqa --answers " + answers + " --annotations " +
                                       ws.dir + "/gqa.json --json " + ws.dir + "/results.json");
  ASSERT_EQ(score.exit_code, 0) << score.err;
  EXPECT_NE(score.out.find("2 error record(s) skipped"), std::string::npos) << score.out;
  const auto results = json::parse(test::read_file(ws.dir + "/results.json"));
  EXPECT_EQ(results["benchmarks"]["gqa"]["counts"]["error_records"], 2) << results.dump();
}

}  // namespace
}  // namespace era
