// Hostile inputs against the tools themselves (subprocesses): every flag checked up front with the
// same guard (exit 2, one line), nothing that can hang (FIFOs, absurd thread counts), question
// files that are not UTF-8 refused as a whole, era_eval touching no answers file before the model
// has loaded, one era_eval per answers file whatever the timing, and signals during the load
// treated like signals during the run. Commands run under `timeout` so a hang fails as 124.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kNoHang = "timeout 60 ";  // a tool that hangs fails with 124

size_t lines_in(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

struct Scratch {
  std::string dir;
  explicit Scratch(const std::string& name) : dir(test::scratch_dir("hostile/" + name)) {
    fs::copy_file(test::source_dir() + "/tests/data/sample.png", dir + "/sample.png");
  }
  std::string questions(int n, const std::string& image = "sample.png") const {
    std::string text;
    for (int i = 0; i < n; ++i) text += json{{"question_id", i}, {"image", image}, {"text", "What is it?"}}.dump() + "\n";
    test::write_file(dir + "/q.jsonl", text);
    return dir + "/q.jsonl";
  }
  std::string eval(const std::string& questions, const std::string& extra, const std::string& bundle = test::bundle_dir()) const {
    return std::string(kNoHang) + test::era_eval_path() + " -m " + bundle + " --questions " + questions + " --image-folder " +
           dir + " --answers " + dir + "/answers.jsonl " + (extra.find("-n ") == std::string::npos ? "-n 2 " : "") + extra;
  }
};

// Each tool, a flag it does not have and a value out of bounds: exit 2, one line "TOOL: error: ...".
TEST(HostileInputs, EveryToolRefusesBadFlagsWithExitTwoAndOneLine) {
  const std::string infer = test::era_infer_path() + " -m " + test::bundle_dir() + " -p hi ";
  const std::string eval = test::era_eval_path() + " -m " + test::bundle_dir() + " --questions q --image-folder . --answers a ";
  const std::string bench = test::era_bench_path() + " -m " + test::bundle_dir() + " -i x.png ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {test::era_infer_path() + " --no-such-flag", "era_infer"},
      {test::era_eval_path() + " --no-such-flag", "era_eval"},
      {test::era_reduce_path() + " --no-such-flag", "era_reduce"},
      {test::era_bench_path() + " --no-such-flag", "era_bench"},
      {test::era_score_path() + " --no-such-flag", "era_score"},
      {infer + "--threads 100000", "--threads"},
      {infer + "--threads -1", "--threads"},
      {infer + "--temp nan", "--temp"},
      {infer + "--temp inf", "--temp"},
      {infer + "--top-p 0", "--top-p"},
      {infer + "--top-p 1.5", "--top-p"},
      {infer + "--keep-ratio 2", "--keep-ratio"},
      {infer + "--tokens -5", "--tokens"},
      {infer + "-n 99999999999", "--max-new-tokens"},
      {infer + "--max-image-pixels 0", "--max-image-pixels"},
      {eval + "--batch-size 100000", "--batch-size"},
      {eval + "--num-chunks 0", "--num-chunks"},
      {eval + "--log-every 0", "--log-every"},
      {eval + "--tokens 64,-1", "--tokens"},
      {bench + "--repeat 0", "--repeat"},
  };
  for (const auto& [command, needle] : cases) {
    const auto started = std::chrono::steady_clock::now();
    const auto r = test::run_command(kNoHang + command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.err;
    EXPECT_EQ(lines_in(r.err), 1u) << command << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << command << "\n" << r.err;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << command;
  }
}

// --era-config naming a folder, a FIFO or a device: refused by name, nothing read or waited on.
TEST(HostileInputs, EraConfigThatIsNotAFileIsRefusedWithoutBlocking) {
  Scratch s("era_config");
  const std::string fifo = s.dir + "/config.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& config : {s.dir, fifo, std::string("/dev/zero")}) {
    const auto r = test::run_command(std::string(kNoHang) + test::era_infer_path() + " -m " + test::bundle_dir() + " -i " +
                                     s.dir + "/sample.png -p hi -n 1 --method era --tokens 8 --era-config " + config);
    EXPECT_EQ(r.exit_code, 2) << config << "\n" << r.err;
    EXPECT_NE(r.err.find("ERA config " + config), std::string::npos) << r.err;
    EXPECT_EQ(lines_in(r.err), 1u) << r.err;
  }
}

// era_score's answers file and era_eval merge's inputs given as FIFOs: refused by name at once.
TEST(HostileInputs, ScoreAndMergeRefuseFifosWithoutBlocking) {
  Scratch s("fifo_answers");
  const std::string fifo = s.dir + "/answers.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const auto score = test::run_command(std::string(kNoHang) + test::era_score_path() + " --benchmark mme --answers " + fifo +
                                       " --annotations " + fifo);
  EXPECT_EQ(score.exit_code, 2) << score.err;
  EXPECT_NE(score.err.find(fifo + ": is a FIFO (named pipe), not a file"), std::string::npos) << score.err;
  const auto merge = test::run_command(std::string(kNoHang) + test::era_eval_path() + " merge --inputs " + fifo + " -o " + s.dir +
                                       "/merged.jsonl");
  EXPECT_EQ(merge.exit_code, 2) << merge.err;
  EXPECT_NE(merge.err.find("answers file " + fifo + ": is a FIFO"), std::string::npos) << merge.err;
  EXPECT_FALSE(fs::exists(s.dir + "/merged.jsonl"));
}

// An answer length beyond the model's context (2048 tokens) is refused, not silently cut.
TEST(HostileInputs, AnswerLengthBeyondTheContextIsRefused) {
  Scratch s("beyond_context");
  const auto infer = test::run_command(std::string(kNoHang) + test::era_infer_path() + " -m " + test::bundle_dir() + " -i " +
                                       s.dir + "/sample.png -p hi -n 100000");
  EXPECT_EQ(infer.exit_code, 2) << infer.err;
  EXPECT_NE(infer.err.find("-n/--max-new-tokens 100000 is not below the model's context of 2048 tokens"), std::string::npos)
      << infer.err;
  const auto eval = test::run_command(s.eval(s.questions(2), "-n 100000"));
  EXPECT_EQ(eval.exit_code, 2) << eval.err;
  EXPECT_NE(eval.err.find("is not below the model's context of 2048 tokens"), std::string::npos) << eval.err;
  EXPECT_FALSE(fs::exists(s.dir + "/answers.jsonl"));
}

// A question file that is not UTF-8 JSON lines is refused as a whole, naming the line; no answers
// file is made.
TEST(HostileInputs, QuestionFilesThatAreNotUtf8AreRefusedAsAWhole) {
  Scratch s("not_utf8");
  const std::string good = json{{"question_id", 0}, {"image", "sample.png"}, {"text", "What?"}}.dump() + "\n";
  std::string utf16 = "\xFF\xFE";
  for (char c : good) utf16 += std::string(1, c) + '\0';
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"utf16", utf16, "line 1: starts with a UTF-16 byte order mark"},
      {"latin1", good + good + "{\"question_id\": 2, \"image\": \"sample.png\", \"text\": \"caf\xE9\"}\n",
       "line 3: not UTF-8 text (byte 0xE9"},
      {"nul", good + std::string("{\"question_id\": 1,\0 \"image\": \"x\"}\n", 34), "line 2: not UTF-8 text (byte 0x00"},
      {"overlong", good + "\xC0\xAF\n", "line 2: not UTF-8 text (byte 0xC0"},
  };
  for (const auto& [name, content, needle] : cases) {
    const std::string q = s.dir + "/" + name + ".jsonl";
    test::write_file(q, content);
    const auto r = test::run_command(s.eval(q, ""));
    EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.err;
    EXPECT_NE(r.err.find("question file " + q + " " + needle), std::string::npos) << name << "\n" << r.err;
    EXPECT_FALSE(fs::exists(s.dir + "/answers.jsonl")) << name;
  }
  // A UTF-8 byte order mark is UTF-8: accepted.
  test::write_file(s.dir + "/bom.jsonl", "\xEF\xBB\xBF" + good);
  EXPECT_EQ(test::run_command(s.eval(s.dir + "/bom.jsonl", "")).exit_code, 0);
}

// "a\u0000b.png" is valid JSON: the path must not be cut at the NUL and answered as "a".
TEST(HostileInputs, AnImagePathWithANulByteIsAnErrorRecord) {
  Scratch s("nul_image");
  fs::copy_file(s.dir + "/sample.png", s.dir + "/a");  // what a truncated path would find
  const std::string q = s.dir + "/q.jsonl";
  test::write_file(q, json{{"question_id", 0}, {"image", std::string("a\0b.png", 7)}, {"text", "What?"}}.dump() + "\n");
  const auto r = test::run_command(s.eval(q, ""));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const auto record = json::parse(test::read_file(s.dir + "/answers.jsonl"));
  ASSERT_TRUE(record.contains("error")) << record.dump();
  EXPECT_NE(record["error"].get<std::string>().find("NUL byte"), std::string::npos) << record.dump();
  EXPECT_FALSE(record.contains("text"));
}

// A bundle that does not load: exit 2 before any answers file (or its lock) exists.
TEST(HostileInputs, EraEvalOnABadBundleWritesNothing) {
  Scratch s("bad_bundle");
  const std::string bundle = s.dir + "/bundle";
  fs::copy(test::bundle_dir(), bundle, fs::copy_options::recursive);
  json manifest = json::parse(test::read_file(bundle + "/manifest.json"));
  manifest["image"]["std"] = {0.0, 0.0, 0.0};
  test::write_file(bundle + "/manifest.json", manifest.dump());
  const auto r = test::run_command(s.eval(s.questions(3), "", bundle));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("image.std[0] = 0.0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(s.dir + "/answers.jsonl"));
  EXPECT_FALSE(fs::exists(s.dir + "/answers.jsonl.lock"));
}

pid_t spawn(const std::string& command, const std::string& err_file) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command + " > /dev/null 2> " + err_file).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Two era_eval started together on one answers file, again and again: exactly one runs (0), the
// other is refused at once (2), whichever wins.
TEST(HostileInputs, TwoEraEvalOnOneAnswersFileExactlyOneRuns) {
  Scratch s("two_at_once");
  const std::string q = s.questions(4);
  for (int trial = 0; trial < 8; ++trial) {
    fs::remove(s.dir + "/answers.jsonl");
    const std::string cmd = test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + q + " --image-folder " +
                            s.dir + " --answers " + s.dir + "/answers.jsonl -n 4 --ignore-eos";
    const pid_t a = spawn(cmd, s.dir + "/a.err");
    const pid_t b = spawn(cmd, s.dir + "/b.err");
    std::vector<int> codes = {wait_exit(a), wait_exit(b)};
    std::sort(codes.begin(), codes.end());
    EXPECT_EQ(codes, (std::vector<int>{0, 2})) << "trial " << trial << "\n"
                                               << test::read_file(s.dir + "/a.err") << test::read_file(s.dir + "/b.err");
    const std::string both = test::read_file(s.dir + "/a.err") + test::read_file(s.dir + "/b.err");
    EXPECT_NE(both.find("is in use by another process"), std::string::npos) << both;
    EXPECT_EQ(test::read_lines(s.dir + "/answers.jsonl").size(), 4u);
  }
  EXPECT_FALSE(fs::exists(s.dir + "/answers.jsonl.lock")) << "the lock file outlived the runs";
}

// SIGINT at once, while the model is still loading: 130 and the "interrupted" summary, as during
// the run; nothing answered, and a rerun completes.
TEST(HostileInputs, SigintDuringTheLoadExitsLikeDuringTheRun) {
  Scratch s("sigint_load");
  const std::string q = s.questions(3);
  const std::string cmd = test::era_eval_path() + " -m " + test::bundle_dir() + " --questions " + q + " --image-folder " + s.dir +
                          " --answers " + s.dir + "/answers.jsonl -n 2";
  const pid_t pid = spawn(cmd, s.dir + "/err");
  // Wait until the model load has begun (its line is printed first), then interrupt.
  for (int i = 0; i < 2000 && test::read_file(s.dir + "/err").find("loading the model") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGINT);
  const int code = wait_exit(pid);
  const std::string err = test::read_file(s.dir + "/err");
  EXPECT_EQ(code, 130) << err;
  EXPECT_NE(err.find("interrupted"), std::string::npos) << err;
  EXPECT_NE(err.find("stopped by a signal"), std::string::npos) << err;
  EXPECT_EQ(test::run_command(std::string(kNoHang) + cmd).exit_code, 0);
  EXPECT_EQ(test::read_lines(s.dir + "/answers.jsonl").size(), 3u);
}

// Every floating-point flag refuses NaN and infinities by name: CLI::Range lets NaN through (each
// comparison with NaN is false), and era_server took --timeout-s nan, then timed out every
// request in the queue. era_server is started with an --allow-dir that does not exist, so a
// --timeout-s it wrongly accepted fails at once on that (not naming --timeout-s) instead of
// serving.
TEST(HostileInputs, FloatingPointFlagsRefuseNanAndInfinity) {
  const std::string infer = test::era_infer_path() + " -m " + test::bundle_dir() + " -p hi ";
  const std::string bench = test::era_bench_path() + " -m " + test::bundle_dir() + " -i x.png ";
  const std::string server_path = (fs::path(test::era_infer_path()).parent_path() / "era_server").string();
  std::vector<std::pair<std::string, std::string>> cases = {
      {infer + "--video-fps nan", "--video-fps"},
      {infer + "--video-fps inf", "--video-fps"},
      {bench + "--vs-machine nan", "--vs-machine"},
      {bench + "--machine-seconds nan", "--machine-seconds"},
      {bench + "--machine-seconds -inf", "--machine-seconds"},
  };
  if (fs::exists(server_path))  // built where cpp-httplib is
    for (const char* value : {"nan", "NaN", "-nan", "inf", "0x1p99999"})
      cases.push_back(
          {server_path + " -m " + test::bundle_dir() + " --allow-dir /nonexistent/era --timeout-s " + value, "--timeout-s"});
  for (const auto& [command, needle] : cases) {
    const auto r = test::run_command(kNoHang + command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.err;
    EXPECT_EQ(lines_in(r.err), 1u) << command << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << command << "\n" << r.err;
  }
}

// Issue 51, point 8: each message names what the user typed. -p '' is refused as an empty
// prompt (it used to fall into chat mode, which then said "give -p"); -n beyond the context names
// -n, not the library's max_new_tokens; --min-pixels above --max-pixels names the pair (and
// --min-pixels alone above the bundle's max_pixels says where each bound came from); an image
// that does not decode names -i (era_infer) or the question's "image" field (era_eval records).
TEST(HostileInputs, EmptyPromptIsRefusedAsEmpty) {
  for (const std::string extra : {" --no-template", ""}) {
    const auto r = test::run_command(std::string(kNoHang) + test::era_infer_path() + " -m " + test::bundle_dir() + " -p ''" +
                                     extra + " -n 2 < /dev/null");
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.err;
    EXPECT_EQ(lines_in(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("era_infer: error: -p/--prompt is empty"), std::string::npos) << extra << "\n" << r.err;
  }
}

TEST(HostileInputs, AnswerLengthBeyondTheContextNamesTheFlag) {
  Scratch s("beyond_context_flag");
  const auto infer = test::run_command(std::string(kNoHang) + test::era_infer_path() + " -m " + test::bundle_dir() + " -i " +
                                       s.dir + "/sample.png -p hi -n 3000");
  EXPECT_EQ(infer.exit_code, 2) << infer.err;
  EXPECT_NE(infer.err.find("era_infer: error: -n/--max-new-tokens 3000 is not below the model's context of 2048 tokens"),
            std::string::npos)
      << infer.err;
  const auto eval = test::run_command(s.eval(s.questions(1), "-n 3000"));
  EXPECT_EQ(eval.exit_code, 2) << eval.err;
  EXPECT_NE(eval.err.find("era_eval: error: -n/--max-new-tokens 3000 is not below"), std::string::npos) << eval.err;
}

TEST(HostileInputs, MinPixelsAboveMaxPixelsNamesThePair) {
  Scratch s("min_above_max_pixels");
  const std::string qwen = test::testdata_dir() + "/bundle-qwen2.5-vl";
  const std::string infer = std::string(kNoHang) + test::era_infer_path() + " -i " + s.dir + "/sample.png -p hi -n 1 ";
  const auto both = test::run_command(infer + "-m " + qwen + " --min-pixels 5000 --max-pixels 4000");
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("--min-pixels 5000 is above --max-pixels 4000"), std::string::npos) << both.err;
  // --min-pixels alone, above the bundle's image.max_pixels (12845056)
  const auto alone = test::run_command(infer + "-m " + qwen + " --min-pixels 20000000");
  EXPECT_EQ(alone.exit_code, 2) << alone.err;
  EXPECT_NE(alone.err.find("min_pixels 20000000 (the request's min_pixels) is above max_pixels 12845056 (the bundle's "
                           "image.max_pixels)"),
            std::string::npos)
      << alone.err;
}

TEST(HostileInputs, AnImageThatDoesNotDecodeNamesTheFlagOrTheField) {
  Scratch s("undecodable_image");
  test::write_file(s.dir + "/bad.png", "not an image at all");
  const auto infer = test::run_command(std::string(kNoHang) + test::era_infer_path() + " -m " + test::bundle_dir() + " -i " +
                                       s.dir + "/bad.png -p hi -n 1");
  EXPECT_EQ(infer.exit_code, 2) << infer.err;
  EXPECT_NE(infer.err.find("era_infer: error: -i/--image " + s.dir + "/bad.png: not a supported image"), std::string::npos)
      << infer.err;
  test::write_file(s.dir + "/bad.mp4", "not a video either");
  const auto video = test::run_command(std::string(kNoHang) + test::era_infer_path() + " -m " + test::onevision_bundle_dir() +
                                       " --video " + s.dir + "/bad.mp4 -p hi -n 1");
  EXPECT_EQ(video.exit_code, 2) << video.err;
  EXPECT_NE(video.err.find("era_infer: error: --video " + s.dir + "/bad.mp4: cannot be read as a video"), std::string::npos)
      << video.err;
  const auto eval = test::run_command(s.eval(s.questions(1, "bad.png"), ""));
  EXPECT_EQ(eval.exit_code, 3) << eval.err;
  const auto record = json::parse(test::read_file(s.dir + "/answers.jsonl"));
  ASSERT_TRUE(record.contains("error")) << record.dump();
  EXPECT_NE(record["error"].get<std::string>().find("image error: field \"image\": " + s.dir + "/bad.png: not a supported image"),
            std::string::npos)
      << record.dump();
}

// Issue 51, points 4 and 5: a bundle whose tokenizer.json has an id far beyond its vocabulary, or
// a pre-tokenizer pattern that backtracks without end, is refused by name at load (exit 2, one
// line); a pattern that explodes only on some prompts refuses those prompts in about a second
// (era_infer exit 2, an era_eval error record) instead of running for hours.
TEST(HostileInputs, AHostileTokenizerJsonIsRefusedByNameAndItsPatternCannotHang) {
  Scratch s("tokenizer_json");
  const auto bundle_with = [&](const std::string& name, const std::function<void(json&)>& change) {
    const std::string bundle = s.dir + "/" + name;
    fs::copy(test::onevision_bundle_dir(), bundle, fs::copy_options::recursive);
    json tokenizer = json::parse(test::read_file(bundle + "/tokenizer.json"));
    change(tokenizer);
    test::write_file(bundle + "/tokenizer.json", tokenizer.dump());
    return bundle;
  };
  const auto set_pattern = [](const std::string& pattern) {
    return [pattern](json& t) { t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern; };
  };
  const std::string ids = bundle_with("ids", [](json& t) { t["model"]["vocab"]["zzhostile"] = 1000000000; });
  const std::string letters = bundle_with("letters", set_pattern("(a+)+$"));
  const std::string pairs = bundle_with("pairs", set_pattern("((ab)+)+$"));
  const std::string infer = std::string(kNoHang) + test::era_infer_path() + " -n 1 -m ";
  std::string hostile_prompt;
  for (int i = 0; i < 40; ++i) hostile_prompt += "ab";
  hostile_prompt += "!";

  auto r = test::run_command(infer + ids + " -p hi");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines_in(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(ids + "/tokenizer.json: model.vocab[\"zzhostile\"]: id 1000000000 is beyond the vocabulary"),
            std::string::npos)
      << r.err;
  r = test::run_command(infer + letters + " -p hi");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string regex_field = "/tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: ";
  EXPECT_NE(r.err.find(letters + regex_field + "the pattern backtracks without end on the probe"), std::string::npos) << r.err;
  EXPECT_EQ(test::run_command(infer + pairs + " -p 'ab ab'").exit_code, 0);  // loads; ordinary prompts run
  const auto start = std::chrono::steady_clock::now();
  r = test::run_command(infer + pairs + " -p '" + hostile_prompt + "'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(pairs + regex_field + "the pattern backtracks without end on the text"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  const std::string q = s.dir + "/q.jsonl";
  test::write_file(q, json{{"question_id", 0}, {"image", "sample.png"}, {"text", hostile_prompt}}.dump() + "\n");
  r = test::run_command(s.eval(q, "-n 1", pairs));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const auto record = json::parse(test::read_file(s.dir + "/answers.jsonl"));
  EXPECT_NE(record.value("error", "").find("prompt error: " + pairs + regex_field), std::string::npos) << record.dump();
}
}  // namespace
}  // namespace era
