// Qwen2.5-VL through the tools, on a random-weight bundle at the real geometry
// (make_random_bundle.py --preset tiny-qwen2.5-vl): era_infer's --max-pixels / --min-pixels and
// --positions reach the request, era_eval answers image and video questions into the answers file
// era_score reads (the scorers take any family's answers). Parity with transformers:
// tests/model/test_hf_parity.cpp (qwen cases).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>

#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string qwen_bundle() { return test::testdata_dir() + "/bundle-qwen2.5-vl"; }

json infer_json(const std::string& args) {
  const auto r = test::run_command(test::era_infer_path() + " -m " + qwen_bundle() + " --image " + test::source_dir() +
                                   "/tests/data/sample.png -p 'What is shown?' -n 2 --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::object();
}

// 640x480 is resized by transformers' smart_resize: to 644x476 (23 x 17 tokens) in the bundle's
// range, to 252x168 (9 x 6) under --max-pixels 50176, to 1176x868 (42 x 31) above --min-pixels 1e6.
TEST(QwenTools, EraInferPixelRangeSetsTheTokenCount) {
  EXPECT_EQ(infer_json("")["stats"]["visual_tokens"], 23 * 17);
  EXPECT_EQ(infer_json("--max-pixels 50176")["stats"]["visual_tokens"], 9 * 6);
  EXPECT_EQ(infer_json("--min-pixels 1000000")["stats"]["visual_tokens"], 42 * 31);
  const auto r = test::run_command(test::era_infer_path() + " -m " + qwen_bundle() + " --image " + test::source_dir() +
                                   "/tests/data/sample.png -p x -n 1 --min-pixels 90000 --max-pixels 50000");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--min-pixels 90000 is above --max-pixels 50000"), std::string::npos) << r.err;  // the flags
}

TEST(QwenTools, EraInferPositionsFlag) {
  const json original = infer_json("--method era --tokens 32");
  const json compact = infer_json("--method era --tokens 32 --positions compact");
  EXPECT_EQ(original["stats"]["visual_tokens"], 32);
  EXPECT_EQ(compact["stats"]["visual_tokens"], 32);
  EXPECT_EQ(original["reductions"][0]["kept"], compact["reductions"][0]["kept"]);  // same tokens, other positions
  const auto r = test::run_command(test::era_infer_path() + " -m " + qwen_bundle() + " --image " + test::source_dir() +
                                   "/tests/data/sample.png -p x -n 1 --positions sideways");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("positions"), std::string::npos) << r.err;
}

// --video-fps samples a file per second of its time (transformers' rule, whole temporal patches):
// a 20-frame clip at 10 fps gives 8 frames at 4 fps and 4 at 2 fps, so twice the tokens.
TEST(QwenTools, EraInferVideoFpsSamplesPerSecond) {
  const std::string clip = test::scratch_dir("qwen_video_fps") + "/clip.avi";
  {
    cv::VideoWriter writer(clip, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10.0, cv::Size(64, 48));
    if (!writer.isOpened()) GTEST_SKIP() << "this OpenCV cannot write MJPEG AVI";
    for (int k = 0; k < 20; ++k) writer.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar(10 * k, 5 * k, 255 - 10 * k)));
  }
  const auto tokens = [&](const std::string& args) {
    const auto r = test::run_command(test::era_infer_path() + " -m " + qwen_bundle() + " --video " + clip +
                                     " -p '<video> What happens?' -n 1 --json " + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out)["stats"]["visual_tokens"].get<int64_t>() : -1;
  };
  const int64_t at4 = tokens("--video-fps 4"), at2 = tokens("--video-fps 2");
  EXPECT_GT(at2, 0);
  EXPECT_EQ(at4, 2 * at2);
  EXPECT_EQ(tokens("--frames 4"), at2);
  const auto both = test::run_command(test::era_infer_path() + " -m " + qwen_bundle() + " --video " + clip +
                                      " -p x -n 1 --frames 4 --video-fps 2");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}

TEST(QwenTools, EraEvalImageAndVideoQuestions) {
  const std::string dir = test::scratch_dir("qwen_eval"), images = dir + "/images";
  fs::create_directories(images + "/clip");
  fs::copy_file(test::source_dir() + "/tests/data/sample.png", images + "/sample.png", fs::copy_options::overwrite_existing);
  for (int k = 0; k < 3; ++k)
    fs::copy_file(images + "/sample.png", images + "/clip/f" + std::to_string(k) + ".png", fs::copy_options::overwrite_existing);
  const std::string q = dir + "/q.jsonl", out = dir + "/answers.jsonl";
  std::ofstream(q) << json{{"question_id", 1}, {"image", "sample.png"}, {"text", "What is it?"}}.dump() << "\n"
                   << json{{"question_id", 2}, {"video", "clip"}, {"text", "What happens?"}}.dump() << "\n";
  fs::remove(out);
  const auto r = test::run_command(test::era_eval_path() + " -m " + qwen_bundle() + " --questions " + q + " --image-folder " +
                                   images + " --answers " + out + " -n 2 --method era --keep-ratio 0.25");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out);
  std::map<int, json> by_id;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    by_id[j["question_id"].get<int>()] = j;
  }
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_TRUE(by_id[1].contains("text"));
  // the image: 391 tokens, a quarter kept (98); the video: 3 frames -> 2 temporal patches (the
  // last frame repeated) of the video range's 644x476 -> 2 x 391 tokens, a quarter of each kept
  EXPECT_EQ(by_id[1]["metadata"]["visual_tokens"], 98);
  EXPECT_EQ(by_id[2]["metadata"]["visual_tokens"], 2 * 98);
}

}  // namespace
}  // namespace era
