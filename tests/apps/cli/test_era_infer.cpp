// era_infer end to end: a real answer with stats and debug dumps, and every kind of bad input
// giving one clear error line and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <tuple>

#include "test_support.h"
#include "util/npy.h"

namespace era {
namespace {

namespace fs = std::filesystem;

std::string infer(const std::string& args) { return test::era_infer_path() + " -m " + test::bundle_dir() + " " + args; }
std::string sample_png() { return test::source_dir() + "/tests/data/sample.png"; }

// One line on stderr that starts with "era_infer: error:" and contains `needle`; exit code 2 or 3.
void expect_clean_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_TRUE(r.exit_code == 2 || r.exit_code == 3) << "exit code " << r.exit_code << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind("era_infer: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

TEST(EraInfer, AnswersWithStats) {
  const auto r = test::run_command(infer("--image " + sample_png() + " -p 'What is in the picture?' -n 12 --stats"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--- era stats ---"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("visual 576"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kv cache"), std::string::npos) << r.out;
}

TEST(EraInfer, JsonOutputAndDumpsMatchReferences) {
  const auto dir = test::scratch_dir("era_infer_dumps");
  const auto r =
      test::run_command(infer("--image " + sample_png() + " -p 'What is shown in this image?' -n 8 --json --ignore-eos" +
                              " --dump-preprocessed " + dir + "/pixels.npy --dump-tokens " + dir + "/tokens.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].size(), 8u);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["stats"]["visual_tokens"], 576);
  EXPECT_EQ(j["stats"]["decode_step_ms"].size(), 7u);

  // The pixels fed to the vision tower are exactly Pillow's (the eager reference's input).
  const auto pixels = read_npy(dir + "/pixels.npy");
  const auto want = read_npy(test::testdata_dir() + "/logits/pixel_values.npy");
  ASSERT_EQ(pixels.sizes(), want.sizes());
  EXPECT_TRUE(torch::equal(pixels, want));
  // And the prompt ids are Python sentencepiece's.
  const auto tokens = nlohmann::json::parse(test::read_file(dir + "/tokens.json"));
  const auto ref = nlohmann::json::parse(test::read_file(test::testdata_dir() + "/logits/input_ids.json"));
  EXPECT_EQ(tokens["ids"], ref["ids"]);
  EXPECT_EQ(tokens["image_positions"].size(), 1u);
}

TEST(EraInfer, GreedyIsDeterministicAndSamplingFollowsTheSeed) {
  const auto base = infer("--image " + sample_png() + " -p 'Describe it.' -n 10 --json --ignore-eos");
  const auto a = nlohmann::json::parse(test::run_command(base).out);
  const auto b = nlohmann::json::parse(test::run_command(base).out);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  const auto s1 = nlohmann::json::parse(test::run_command(base + " --temp 1.5 --seed 3").out);
  const auto s2 = nlohmann::json::parse(test::run_command(base + " --temp 1.5 --seed 3").out);
  const auto s3 = nlohmann::json::parse(test::run_command(base + " --temp 1.5 --seed 4").out);
  EXPECT_EQ(s1["tokens"], s2["tokens"]);
  EXPECT_NE(s1["tokens"], s3["tokens"]);
}

TEST(EraInfer, EraWith64TokensEndToEnd) {
  const auto dir = test::scratch_dir("era_end_to_end");
  const auto r = test::run_command(infer("--image " + sample_png() + " -p 'What is in the picture?' -n 6 --json" +
                                         " --method era --tokens 64 --save-viz " + dir + "/viz.png"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stats"]["visual_tokens"], 64);  // exactly what the decoder saw
  ASSERT_EQ(j["reductions"].size(), 1u);
  const auto& red = j["reductions"][0];
  EXPECT_EQ(red["kept"].size(), 64u);
  EXPECT_EQ(red["assignment"].size(), 576u);
  int64_t total = 0;
  for (const auto& c : red["cluster_sizes"]) total += c.get<int64_t>();
  EXPECT_EQ(total, 576);
  for (const auto& b : red["bias"]) EXPECT_GE(b.get<double>(), 1.0 - 1e-6);
  EXPECT_FALSE(j["answer"].get<std::string>().empty() && j["tokens"].empty());

  // The picture: exactly the file named (no _0 suffix), the 336 px view at twice the size with
  // its legend (tests/report/test_reduction_viz.cpp checks what is drawn).
  const cv::Mat pic = cv::imread(dir + "/viz.png");
  ASSERT_FALSE(pic.empty());
  EXPECT_EQ(pic.cols, 12 + 672 + 12);
  EXPECT_EQ(pic.rows, 12 + 672 + 12 + 2 * 22 + 12);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
}

TEST(EraInfer, AttentionReport) {
  const auto dir = test::scratch_dir("attn_report");
  const auto r = test::run_command(infer("--image " + sample_png() + " -p 'What is in the picture?' -n 1" +
                                         " --method era --tokens 32 --attn-report " + dir + "/report.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/report.json"));
  EXPECT_EQ(j["visual_tokens_full"], 576);
  EXPECT_EQ(j["visual_tokens_reduced"], 32);
  ASSERT_EQ(j["layers"].size(), 2u);
  for (const auto& l : j["layers"]) {
    const double sum = l["share_reduced"]["system"].get<double>() + l["share_reduced"]["visual"].get<double>() +
                       l["share_reduced"]["instruction"].get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_GE(l["group_kl"].get<double>(), 0.0);
  }
}

// Every ablation variant of the paper's module table runs end to end; only full ERA rectifies.
TEST(EraInfer, AblationVariantsAndOptions) {
  for (const std::string method : {"era:dep-x", "era:dep-y", "era:dep", "era:dep+btr", "era"}) {
    const auto r = test::run_command(infer("--image " + sample_png() + " -p 'What is it?' -n 2 --json --method " + method +
                                           " --keep-ratio 0.125 --era-config " + test::source_dir() + "/configs/era.json" +
                                           " --era-set lar_schedule=early --era-set alpha=0.4"));
    ASSERT_EQ(r.exit_code, 0) << method << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["stats"]["visual_tokens"], 72) << method;  // 576 / 8
    EXPECT_NEAR(j["era_options"]["alpha"].get<double>(), 0.4, 1e-6) << method;
    EXPECT_EQ(j["era_options"]["lar_schedule"], "early") << method;
    double max_bias = 0;
    for (const auto& b : j["reductions"][0]["bias"]) max_bias = std::max(max_bias, b.get<double>());
    if (method == "era") {
      EXPECT_GT(max_bias, 1.5) << method;
    } else {
      EXPECT_NEAR(max_bias, 1.0, 1e-6) << method;
    }
    const bool recycles = method == "era" || method == "era:dep+btr";
    int64_t assigned = 0;
    for (const auto& a : j["reductions"][0]["assignment"]) assigned += a.get<int64_t>() >= 0;
    EXPECT_EQ(assigned, recycles ? 576 : 72) << method;
  }
}

TEST(EraInfer, TwoImagesInOnePrompt) {
  const auto jpg = test::source_dir() + "/tests/data/sample.jpg";
  for (const std::string& bundle : {test::bundle_dir(), test::next_bundle_dir()}) {
    const auto dir = test::scratch_dir("two_images");
    const auto r = test::run_command(test::era_infer_path() + " -m " + bundle + " --image " + sample_png() + " --image " + jpg +
                                     " -p 'Compare <image> with <image>.' -n 3 --json --method era --tokens 160" +
                                     " --dump-tokens " + dir + "/tokens.json");
    ASSERT_EQ(r.exit_code, 0) << bundle << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["reductions"].size(), 2u);
    const auto tokens = nlohmann::json::parse(test::read_file(dir + "/tokens.json"));
    EXPECT_EQ(tokens["image_positions"].size(), 2u);
    EXPECT_EQ(j["stats"]["visual_tokens"].get<size_t>(), j["reductions"][0]["kept"].size() + j["reductions"][1]["kept"].size());
  }
}

// A video as a folder of frames on the OneVision bundle: --frames samples it, --stats names it, the
// JSON marks the item a video, --dump-tokens lists its placeholder; a LLaVA-1.5 bundle refuses it.
TEST(EraInfer, VideoFolderWithFramesOnOnevision) {
  const auto dir = test::scratch_dir("era_infer_video");
  const std::string frames = dir + "/frames";
  std::filesystem::create_directories(frames);
  for (int k = 0; k < 5; ++k) std::filesystem::copy_file(sample_png(), frames + "/f" + std::to_string(k) + ".png");
  const std::string base = test::era_infer_path() + " -m " + test::onevision_bundle_dir() + " --video " + frames +
                           " -p 'What happens?' -n 2 --ignore-eos";
  auto r = test::run_command(base + " --frames 3 --method era --keep-ratio 0.25 --json --dump-tokens " + dir + "/tokens.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["reductions"].size(), 1u);
  EXPECT_EQ(j["reductions"][0]["media"], "video");
  EXPECT_EQ(j["reductions"][0]["original_tokens"], 3 * 196);
  EXPECT_EQ(j["stats"]["visual_tokens"], 3 * 49 + 1);
  const auto tokens = nlohmann::json::parse(test::read_file(dir + "/tokens.json"));
  EXPECT_EQ(tokens["video_positions"].size(), 1u);
  EXPECT_EQ(tokens["image_positions"].size(), 0u);
  r = test::run_command(base + " --stats");  // every frame of the folder
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("video 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("visual " + std::to_string(5 * 196 + 1)), std::string::npos) << r.out;
  // bad videos and models: exit 2, one line naming the item
  r = test::run_command(test::era_infer_path() + " -m " + test::onevision_bundle_dir() + " --video " + dir +
                        "/missing.mp4 -p 'What?' -n 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.mp4: no such file"), std::string::npos) << r.err;
  r = test::run_command(test::era_infer_path() + " -m " + test::bundle_dir() + " --video " + frames + " -p 'What?' -n 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("takes no video"), std::string::npos) << r.err;
  r = test::run_command(base + " --frames 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--frames"), std::string::npos) << r.err;
}

// FastV / DART prune inside the decoder (after layer K = 1 of the tiny 2-layer model): the
// stats report what layers >= K saw, layer 0 saw every visual token.
TEST(EraInfer, InDecoderMethodsEndToEnd) {
  for (const std::string& bundle : {test::bundle_dir(), test::next_bundle_dir()}) {
    auto run = [&](const std::string& args) {
      const auto r = test::run_command(test::era_infer_path() + " -m " + bundle + " --image " + sample_png() +
                                       " -p 'What is in the picture?' -n 4 --ignore-eos --json " + args);
      EXPECT_EQ(r.exit_code, 0) << bundle << " " << args << ": " << r.err;
      return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
    };
    const auto full = run("");
    ASSERT_FALSE(full.empty());
    const int64_t all = full["stats"]["visual_tokens"];
    const std::string k1 = " --method-set fastv_layer=1 --method-set dart_layer=1";
    for (const auto& [method, extra, want] :
         std::vector<std::tuple<std::string, std::string, int64_t>>{{"fastv", "", 64},
                                                                    {"dart", "", 68 /* official: 4 + 8 * floor(64 / 8) */},
                                                                    {"dart", " --method-set dart_exact_budget=true", 64}}) {
      const auto j = run("--method " + method + " --tokens 64" + k1 + extra);
      ASSERT_FALSE(j.empty());
      EXPECT_EQ(j["stats"]["visual_tokens"], want) << bundle << " " << method << extra;
      EXPECT_EQ(j["stats"]["visual_tokens_early_layers"], all) << bundle << " " << method;
      EXPECT_EQ(j["stats"]["prompt_tokens"], j["stats"]["text_tokens"].get<int64_t>() + want);
      EXPECT_EQ(j["tokens"].size(), 4u);
      ASSERT_EQ(j["reductions"].size(), 1u);
      EXPECT_EQ(j["reductions"][0]["method"], method);
      EXPECT_EQ(j["reductions"][0]["kept"].size(), static_cast<size_t>(want));
    }
    // A budget of the whole image keeps everything: the answer is the unpruned one.
    const auto keep_all = run("--method fastv --tokens " + std::to_string(all) + k1);
    ASSERT_FALSE(keep_all.empty());
    EXPECT_EQ(keep_all["tokens"], full["tokens"]) << bundle;
  }
}

TEST(EraInferErrors, InDecoderLayerOutOfRange) {
  // The default K = 2 leaves no layer to prune in the 2-layer tiny model.
  expect_clean_error(test::run_command(infer("--image " + sample_png() + " -p hi --method fastv --tokens 64")), "fastv_layer");
}

TEST(EraInferErrors, UnknownMethod) {
  expect_clean_error(test::run_command(infer("--image " + sample_png() + " -p hi --method magic")), "magic");
}

TEST(EraInferErrors, UnknownEraOption) {
  expect_clean_error(test::run_command(infer("--image " + sample_png() + " -p hi --method era --tokens 64 --era-set gamma=2")),
                     "--era-set: ERA option gamma=2: unknown option 'gamma'");
}

// A reduction with no budget used to keep every token under the method's name.
TEST(EraInferErrors, ReductionWithoutBudget) {
  for (const std::string method : {"era", "divprune", "fastv"}) {
    expect_clean_error(test::run_command(infer("--image " + sample_png() + " -p hi --method " + method)),
                       "method '" + method + "' needs a budget");
  }
  const auto full = test::run_command(infer("--image " + sample_png() + " -p hi -n 1 --method full"));
  EXPECT_EQ(full.exit_code, 0) << full.err;
}

// No machine CI runs on has a GPU: --device cuda is refused before anything loads, with the
// reason (CPU-only LibTorch, or no GPU visible), exit 2. util/device's tests cover the wording.
TEST(EraInferErrors, CudaDeviceWithoutCuda) {
  const auto r = test::run_command(infer("--image " + sample_png() + " -p hi --device cuda"));
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a usable CUDA device";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_clean_error(r, "device 'cuda' requested");
  const auto bad = test::run_command(infer("--image " + sample_png() + " -p hi --device tpu"));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  expect_clean_error(bad, "unknown device 'tpu'");
}

TEST(EraInferErrors, MissingImage) {
  expect_clean_error(test::run_command(infer("--image /no/such/image.png -p hi")), "/no/such/image.png");
}

TEST(EraInferErrors, ZeroByteImage) {
  const auto path = test::scratch_dir("zero") + "/empty.jpg";
  std::ofstream(path).close();
  expect_clean_error(test::run_command(infer("--image " + path + " -p hi")), path);
}

TEST(EraInferErrors, TruncatedJpeg) {
  const auto path = test::scratch_dir("trunc") + "/truncated.jpg";
  const auto bytes = test::read_file(test::source_dir() + "/tests/data/sample.jpg");
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_clean_error(test::run_command(infer("--image " + path + " -p hi")), path);
}

TEST(EraInferErrors, TextFileNamedJpg) {
  const auto path = test::scratch_dir("text") + "/notes.jpg";
  std::ofstream(path) << "this is not an image\n";
  expect_clean_error(test::run_command(infer("--image " + path + " -p hi")), path);
}

TEST(EraInferErrors, ImageOverPixelLimit) {
  const auto r = test::run_command(infer("--image " + sample_png() + " -p hi --max-image-pixels 1000"));
  expect_clean_error(r, sample_png());
  EXPECT_NE(r.err.find("640"), std::string::npos) << r.err;
}

TEST(EraInferErrors, MissingBundle) {
  const auto r = test::run_command(test::era_infer_path() + " -m /no/such/bundle --image " + sample_png() + " -p hi");
  expect_clean_error(r, "/no/such/bundle");
}

// A copy of the test bundle with one thing damaged.
std::string damaged_bundle(const std::string& name) {
  const auto dir = test::scratch_dir(name) + "/bundle";
  fs::copy(test::bundle_dir(), dir, fs::copy_options::recursive);
  return dir;
}

TEST(EraInferErrors, BundleMissingModule) {
  const auto dir = damaged_bundle("missing_module");
  fs::remove(dir + "/decoder.pt");
  const auto r = test::run_command(test::era_infer_path() + " -m " + dir + " --image " + sample_png() + " -p hi");
  expect_clean_error(r, "decoder.pt");
}

TEST(EraInferErrors, BundleWrongModule) {
  const auto dir = damaged_bundle("wrong_module");
  fs::copy_file(dir + "/projector.pt", dir + "/decoder.pt", fs::copy_options::overwrite_existing);
  const auto r = test::run_command(test::era_infer_path() + " -m " + dir + " --image " + sample_png() + " -p hi");
  expect_clean_error(r, "decoder.pt");
}

TEST(EraInferErrors, BundleWrongShapedModule) {
  // The manifest now describes a model with another vocabulary than the exported decoder.
  const auto dir = damaged_bundle("wrong_shape");
  auto manifest = nlohmann::json::parse(test::read_file(dir + "/manifest.json"));
  manifest["text"]["vocab_size"] = manifest["text"]["vocab_size"].get<int64_t>() * 2;
  std::ofstream(dir + "/manifest.json") << manifest.dump(1);
  const auto r = test::run_command(test::era_infer_path() + " -m " + dir + " --image " + sample_png() + " -p hi");
  expect_clean_error(r, "embed_tokens.weight");
}

TEST(EraInferErrors, DecoderFromAnotherModel) {
  const auto dir = damaged_bundle("other_model");
  fs::copy_file(test::testdata_dir() + "/bundle-other/decoder.pt", dir + "/decoder.pt", fs::copy_options::overwrite_existing);
  const auto r = test::run_command(test::era_infer_path() + " -m " + dir + " --image " + sample_png() + " -p hi");
  expect_clean_error(r, "decoder.pt");
  EXPECT_NE(r.err.find("another model"), std::string::npos) << r.err;
}

TEST(EraInferErrors, CorruptModuleFile) {
  const auto dir = damaged_bundle("corrupt_module");
  std::ofstream(dir + "/vision.pt", std::ios::binary | std::ios::trunc) << "garbage";
  const auto r = test::run_command(test::era_infer_path() + " -m " + dir + " --image " + sample_png() + " -p hi");
  expect_clean_error(r, "vision.pt");
}

TEST(EraInferErrors, OverLongPrompt) {
  std::string prompt;
  for (int i = 0; i < 1500; ++i) prompt += "word ";
  const auto r = test::run_command(infer("--image " + sample_png() + " -p '" + prompt + "'"));
  expect_clean_error(r, "prompt too long");
}

TEST(EraInferErrors, PlaceholderCountMismatch) {
  const auto r = test::run_command(infer("--image " + sample_png() + " -p '<image> and <image>'"));
  expect_clean_error(r, "placeholder");
}

TEST(EraInferErrors, BadOptionValue) {
  const auto r = test::run_command(infer("--image " + sample_png() + " -p hi --top-p 0"));
  expect_clean_error(r, "top-p");
}

}  // namespace
}  // namespace era

namespace era {
namespace {

// The competing pre-LLM methods end to end: the decoder sees exactly the reported number of
// visual tokens, which is the budget on LLaVA-1.5 and the real count (newlines included) on
// LLaVA-NeXT.
class CompetingMethod : public ::testing::TestWithParam<std::string> {};

nlohmann::json run_json(const std::string& bundle, const std::string& args) {
  const auto r = test::run_command(test::era_infer_path() + " -m " + bundle + " --image " + sample_png() +
                                   " -p 'What is in the picture?' -n 2 --json " + args);
  EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

int64_t newlines(const nlohmann::json& reduction) {
  int64_t n = 0;
  for (const auto& k : reduction["kept"]) n += k.get<int64_t>() == -1;
  return n;
}

TEST_P(CompetingMethod, LlavaFifteenFeedsTheBudget) {
  const auto j = run_json(test::bundle_dir(), "--method " + GetParam() + " --tokens 64");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["stats"]["visual_tokens"], 64);  // pool: 8 x 8
  ASSERT_EQ(j["reductions"].size(), 1u);
  EXPECT_EQ(j["reductions"][0]["kept"].size(), 64u);
  EXPECT_EQ(j["reductions"][0]["assignment"].size(), 576u);
}

TEST_P(CompetingMethod, LlavaNextReportsTheRealCount) {
  const auto full = run_json(test::next_bundle_dir(), "--method full");
  const auto j = run_json(test::next_bundle_dir(), "--method " + GetParam() + " --tokens 160");
  ASSERT_FALSE(full.is_null());
  ASSERT_FALSE(j.is_null());
  const auto& red = j["reductions"][0];
  const int64_t fed = j["stats"]["visual_tokens"].get<int64_t>();
  EXPECT_EQ(fed, static_cast<int64_t>(red["kept"].size()));  // newlines (kept -1) included
  const int64_t rows = newlines(full["reductions"][0]);
  const int64_t crops = static_cast<int64_t>(red["assignment"].size()) / 576;
  if (GetParam() == "divprune") {
    EXPECT_EQ(fed, 160);  // one selection over the packed sequence, newlines count
  } else {
    EXPECT_EQ(newlines(red), rows);  // every surviving row keeps its newline, on top of the budget
    EXPECT_LE(fed - rows, crops * 32);
    EXPECT_GT(fed - rows, 32);  // the base crop alone brings up to 32
  }
  EXPECT_LT(fed, full["stats"]["visual_tokens"].get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(EraInfer, CompetingMethod, ::testing::Values("divprune", "visionzip", "cdpruner", "pool", "random"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(EraInfer, MethodOptionsReachTheReducer) {
  const auto a = run_json(test::bundle_dir(), "--method random --tokens 16 --method-set random_seed=1");
  const auto b = run_json(test::bundle_dir(), "--method random --tokens 16 --method-set random_seed=2");
  ASSERT_FALSE(a.is_null());
  ASSERT_FALSE(b.is_null());
  EXPECT_NE(a["reductions"][0]["kept"], b["reductions"][0]["kept"]);
}

}  // namespace
}  // namespace era
