// era against Hugging Face transformers itself (tests/python/make_hf_refs.py): tiny checkpoints
// written by transformers' save_pretrained, exported by era, compared with transformers' own
// processor, forward and generate — pixel values, input ids, the number of visual tokens, logits
// at every prompt position and 32 greedy tokens, image by image (the images of each case are
// listed in tests/python/references/hf_cases.py). Registered by tests/CMakeLists.txt only when ERA_PYTHON has
// transformers (ERA_HF_PARITY).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "era/debug.h"
#include "era/era.h"
#include "parity_support.h"
#include "test_support.h"
#include "util/npy.h"

namespace era {
namespace {

std::string case_dir(const std::string& name) { return test::testdata_dir() + "/hf/" + name; }

using test::read_json;

// As the other parity tests: the largest absolute difference over the largest reference value.
using test::max_rel_error;

// transformers' processor repeats the image token once per visual token; era's prompt keeps one
// placeholder per image and splices the visual tokens in later.
std::vector<int64_t> one_placeholder_per_image(const std::vector<int64_t>& ids, int64_t image_token_id) {
  std::vector<int64_t> out;
  for (const int64_t id : ids) {
    if (id == image_token_id && !out.empty() && out.back() == image_token_id) continue;
    out.push_back(id);
  }
  return out;
}

// One prompt of a case: its image (or images, "pngs"), and the question in the bundle's template,
// or (OneVision cases, "raw_prompt") the very text transformers' chat template gave.
// A video case's prompt has its video instead: a folder of frame PNGs ("video_dir").
Request request_for(const nlohmann::json& c, const nlohmann::json& image) {
  Request req;
  if (image.contains("video_dir")) {
    req.videos = {Video::from_folder(image["video_dir"].get<std::string>())};
    // Qwen2.5-VL: the frames' rate sets the M-RoPE time step, as the reference's video metadata
    if (image.contains("fps")) req.videos[0] = req.videos[0].with_sampled_fps(image["fps"].get<double>());
  } else {
    req.images = image.contains("pngs") ? image["pngs"].get<std::vector<std::string>>()
                                        : std::vector<std::string>{image["png"].get<std::string>()};
  }
  // Qwen2.5-VL cases may set the processor's pixel range per prompt
  req.min_pixels = image.value("min_pixels", int64_t{0});
  req.max_pixels = image.value("max_pixels", int64_t{0});
  if (c.value("raw_prompt", false)) {
    req.prompt = c["prompt"].get<std::string>();
    req.use_template = false;
  } else {
    req.prompt = c["question"].get<std::string>();
  }
  return req;
}

// Which models compute: the bundle's TorchScript modules, or era's own C++ models over the very
// folder transformers saved (SessionOptions::hf_weights: the decoder, and the LLaVA families' towers
// and projectors).
// kHfFolder: no bundle at all, the folder opened directly (its manifest built by era).
enum class Backend { kTorchScript, kNative, kHfFolder };

void check_case(const std::string& name, Backend backend = Backend::kTorchScript) {
  if (!std::filesystem::exists(test::testdata_dir() + "/hf")) GTEST_SKIP() << "no HF parity data (ERA_HF_PARITY off)";
  c10::InferenceMode inference;
  const auto c = read_json(case_dir(name) + "/case.json");
  SessionOptions options;
  if (backend == Backend::kNative) options.hf_weights = c["checkpoint"].get<std::string>();
  auto session = Session::open(c[backend == Backend::kHfFolder ? "checkpoint" : "bundle"].get<std::string>(), options);
  ASSERT_EQ(session.info().decoder, backend == Backend::kTorchScript ? "torchscript" : "native");
  ASSERT_FALSE(c["images"].empty());
  for (const auto& image : c["images"]) {
    const std::string dir = image["dir"];
    SCOPED_TRACE(name +
                 (image.contains("frames") ? " video of " + std::to_string(image["frames"].get<int>()) + " frames " : " image ") +
                 std::to_string(image["width"].get<int>()) + "x" + std::to_string(image["height"].get<int>()));
    const auto ref = read_json(dir + "/tokens.json");
    Request req = request_for(c, image);

    const auto in = debug::prepare(session, req);
    const auto pixels = read_npy(dir + "/pixel_values.npy");
    ASSERT_EQ(in.pixel_values.sizes(), pixels.sizes());
    EXPECT_TRUE(torch::equal(in.pixel_values, pixels))
        << "max abs pixel difference " << (in.pixel_values - pixels).abs().max().item<float>();
    // (a video case's reference names the video token's id in this field)
    const int64_t image_token_id = ref["image_token_id"];
    EXPECT_EQ(image.contains("video_dir") ? in.video_token_id : in.image_token_id, image_token_id);
    // OneVision cases also carry the tokenizer's own ids of the prompt (one per placeholder):
    // adjacent images make a single run in input_ids.
    EXPECT_EQ(in.token_ids, ref.contains("prompt_ids")
                                ? ref["prompt_ids"].get<std::vector<int64_t>>()
                                : one_placeholder_per_image(ref["input_ids"].get<std::vector<int64_t>>(), image_token_id));

    // Qwen2.5-VL: the (t, h, w) grids and transformers' multimodal position ids [3, L]
    if (ref.contains("grid_thw")) {
      std::vector<std::array<int64_t, 3>> grids;
      for (const auto& g : ref["grid_thw"]) grids.push_back({g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()});
      EXPECT_EQ(in.grids, grids);
    }
    const auto prompt = debug::prompt(session, req);
    EXPECT_EQ(prompt.visual_tokens, ref["visual_tokens"].get<int64_t>());
    if (std::filesystem::exists(dir + "/position_ids.npy")) {
      const auto want_positions = read_npy(dir + "/position_ids.npy").to(torch::kLong);  // [3, L]
      ASSERT_EQ(prompt.positions.dim(), 3);
      EXPECT_TRUE(torch::equal(prompt.positions[0].t(), want_positions))
          << "position ids differ from transformers' get_rope_index";
    }
    const auto want = read_npy(dir + "/logits.npy");
    ASSERT_EQ(prompt.logits.sizes(), want.sizes());
    const double err = max_rel_error(prompt.logits, want);
    std::cout << "[ measured ] " << name
              << (backend == Backend::kNative     ? " (native)"
                  : backend == Backend::kHfFolder ? " (HF folder)"
                                                  : "")
              << " " << image["width"] << "x" << image["height"] << ": logits max relative error vs transformers " << err << "\n";
    EXPECT_LE(err, 1e-4);

    // Neither side stops at EOS (the fixture cleared generate's eos_token_id), so all 32 count.
    req.max_new_tokens = 32;
    req.stop_at_eos = false;
    const auto result = session.generate(req);
    EXPECT_EQ(result.tokens.size(), 32u);
    EXPECT_EQ(result.tokens, ref["greedy"].get<std::vector<int64_t>>());
  }
}

TEST(HfParity, Llava15Gqa) { check_case("llava15_gqa"); }
TEST(HfParity, Llava15TiedEmbeddingsPositiveFeatureLayer) { check_case("llava15_tied_layer1"); }
TEST(HfParity, Llava15FullStrategyKeepsCls) { check_case("llava15_full"); }
TEST(HfParity, Llava15FeatureLayerList) { check_case("llava15_layers"); }
TEST(HfParity, NextGqaCustomPinpoints) { check_case("next_gqa_pins"); }
TEST(HfParity, NextFeatureLayerList) { check_case("next_layers"); }
TEST(HfParity, NextMistralTextModel) { check_case("next_mistral"); }
TEST(HfParity, NextYiChatmlPiecesInSentencePiece) { check_case("next_yi_chatml"); }
// SigLIP + Qwen2 + byte-level BPE; anyres_max_9 with unpad on either axis and the downscale
TEST(HfParity, OnevisionImagesAnyresMax9) { check_case("onevision_images"); }
// two images in one prompt: one padded square crop and a newline each
TEST(HfParity, OnevisionTwoImagesInOnePrompt) { check_case("onevision_two_images"); }
// a video as frame images (8 frames of 640x480, 3 of 300x500, 1 of 384x384): the video
// processor's resize and statistics, 2x2 bilinear pooling to 196 tokens a frame, one newline
TEST(HfParity, OnevisionVideoFramesPooledWithOneNewline) { check_case("onevision_video"); }
// Qwen2.5-VL: smart_resize over many sizes and pixel ranges, window attention, the patch merger,
// multimodal RoPE positions; two images in one prompt; a video (temporal patches, time steps)
TEST(HfParity, QwenImagesNativeResolution) { check_case("qwen_images"); }
TEST(HfParity, QwenTwoImagesInOnePrompt) { check_case("qwen_two_images"); }
TEST(HfParity, QwenVideoTemporalPatches) { check_case("qwen_video"); }

// The same cases with era's native models over the HF folder itself.
TEST(HfParity, Llava15GqaNative) { check_case("llava15_gqa", Backend::kNative); }
TEST(HfParity, Llava15TiedEmbeddingsPositiveFeatureLayerNative) { check_case("llava15_tied_layer1", Backend::kNative); }
TEST(HfParity, Llava15FullStrategyKeepsClsNative) { check_case("llava15_full", Backend::kNative); }
TEST(HfParity, Llava15FeatureLayerListNative) { check_case("llava15_layers", Backend::kNative); }
TEST(HfParity, NextGqaCustomPinpointsNative) { check_case("next_gqa_pins", Backend::kNative); }
TEST(HfParity, NextFeatureLayerListNative) { check_case("next_layers", Backend::kNative); }
TEST(HfParity, NextMistralTextModelNative) { check_case("next_mistral", Backend::kNative); }
TEST(HfParity, NextYiChatmlPiecesInSentencePieceNative) { check_case("next_yi_chatml", Backend::kNative); }
TEST(HfParity, OnevisionImagesAnyresMax9Native) { check_case("onevision_images", Backend::kNative); }
TEST(HfParity, OnevisionTwoImagesInOnePromptNative) { check_case("onevision_two_images", Backend::kNative); }
TEST(HfParity, OnevisionVideoFramesPooledWithOneNewlineNative) { check_case("onevision_video", Backend::kNative); }
TEST(HfParity, QwenImagesNativeResolutionNative) { check_case("qwen_images", Backend::kNative); }
TEST(HfParity, QwenTwoImagesInOnePromptNative) { check_case("qwen_two_images", Backend::kNative); }
TEST(HfParity, QwenVideoTemporalPatchesNative) { check_case("qwen_video", Backend::kNative); }

// ... and with no bundle at all: the folder transformers saved, opened directly. (next_yi_chatml's
// reference prompt is transformers' chat template, era's "chatml", which its bundle was exported
// with by name; a folder gets the LLaVA evaluation template chatml_direct.)
TEST(HfParity, Llava15GqaFolder) { check_case("llava15_gqa", Backend::kHfFolder); }
TEST(HfParity, Llava15TiedEmbeddingsPositiveFeatureLayerFolder) { check_case("llava15_tied_layer1", Backend::kHfFolder); }
TEST(HfParity, Llava15FullStrategyKeepsClsFolder) { check_case("llava15_full", Backend::kHfFolder); }
TEST(HfParity, Llava15FeatureLayerListFolder) { check_case("llava15_layers", Backend::kHfFolder); }
TEST(HfParity, NextGqaCustomPinpointsFolder) { check_case("next_gqa_pins", Backend::kHfFolder); }
TEST(HfParity, NextFeatureLayerListFolder) { check_case("next_layers", Backend::kHfFolder); }
TEST(HfParity, NextMistralTextModelFolder) { check_case("next_mistral", Backend::kHfFolder); }

// Every registered method on `session` for `req` (2 tokens, `budget` visual tokens, in-decoder
// methods after decoder layer 1 of the tiny 2-layer decoders): it runs and keeps fewer tokens than
// full, or is one of `refusing` and refuses with kInvalidArgument naming itself.
void expect_every_method(Session& session, Request req, int64_t budget, const std::set<std::string>& refusing) {
  req.max_new_tokens = 2;
  req.stop_at_eos = false;
  req.reduction.tokens = budget;
  req.reduction.baselines.fastv_layer = 1;
  req.reduction.baselines.dart_layer = 1;
  const int64_t full = session.generate(req).stats.visual_tokens;
  for (const auto& method : available_methods()) {
    SCOPED_TRACE(method.name);
    req.reduction.method = method.name;
    try {
      const Result r = session.generate(req);
      EXPECT_EQ(r.tokens.size(), 2u);
      if (method.name != "full") {
        EXPECT_LT(r.stats.visual_tokens, full);
      }
    } catch (const Error& e) {
      EXPECT_EQ(refusing.count(method.name), 1u) << e.what();
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(method.name), std::string::npos) << e.what();
    }
  }
}

// Every method on a Qwen2.5-VL bundle (an image, and a video): it runs with a 16-token budget and
// keeps fewer tokens than full, or refuses naming itself: VisionZip (no CLS token) and pool (a
// square grid only). Kept tokens keep their original M-RoPE positions (default) or count up
// (compact): the same tokens, other positions, other logits.
TEST(HfParity, QwenEveryMethodRunsOrRefusesByName) {
  if (!std::filesystem::exists(test::testdata_dir() + "/hf")) GTEST_SKIP() << "no HF parity data (ERA_HF_PARITY off)";
  c10::InferenceMode inference;
  for (const char* name : {"qwen_images", "qwen_video"}) {
    SCOPED_TRACE(name);
    const auto c = read_json(case_dir(name) + "/case.json");
    auto session = Session::open(c["bundle"].get<std::string>());
    Request req = request_for(c, c["images"][0]);
    expect_every_method(session, req, 16, {"visionzip", "pool"});
    req.max_new_tokens = 2;
    req.reduction.tokens = 16;
    req.reduction.method = "era";
    const auto original = debug::prompt(session, req);
    req.reduction.positions = "compact";
    const auto compact = debug::prompt(session, req);
    EXPECT_EQ(original.visual_tokens, compact.visual_tokens);
    EXPECT_FALSE(torch::equal(original.positions, compact.positions));
    EXPECT_TRUE(torch::equal(original.embeds, compact.embeds));
    // compact: every position counts up by one; original (an image wider than 16 tokens): the
    // text after it starts past where 16 tokens would put it
    EXPECT_EQ(compact.positions.max().item<int64_t>() + 1, compact.positions.size(1));
    if (std::string(name) == "qwen_images") {
      EXPECT_GT(original.positions.max().item<int64_t>() + 1, original.positions.size(1));
    }
  }
}

// Every method on a OneVision bundle (tiled 640x480 image, and the two-image prompt): it runs with a
// 64-token budget, or (VisionZip, which ranks by a CLS token SigLIP lacks) refuses naming itself
// and the reason. ERA reads the mean-attention saliency there whatever readout is asked.
TEST(HfParity, OnevisionEveryMethodRunsOrRefusesByName) {
  if (!std::filesystem::exists(test::testdata_dir() + "/hf")) GTEST_SKIP() << "no HF parity data (ERA_HF_PARITY off)";
  c10::InferenceMode inference;
  for (const char* name : {"onevision_images", "onevision_two_images"}) {
    SCOPED_TRACE(name);
    const auto c = read_json(case_dir(name) + "/case.json");
    auto session = Session::open(c["bundle"].get<std::string>());
    Request req = request_for(c, c["images"][0]);
    expect_every_method(session, req, 64, {"visionzip"});
    try {  // and says why: the tower has no CLS token
      req.reduction.method = "visionzip";
      req.reduction.tokens = 64;
      session.generate(req);
      ADD_FAILURE() << "visionzip ran on a tower without a CLS token";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CLS"), std::string::npos) << e.what();
    }
    req.max_new_tokens = 2;
    req.stop_at_eos = false;
    req.reduction.method = "era";
    req.reduction.era.readout = SaliencyReadout::kCls;
    const Result cls = session.generate(req);
    req.reduction.era.readout = SaliencyReadout::kMean;
    const Result mean = session.generate(req);
    EXPECT_EQ(cls.reductions.at(0).kept, mean.reductions.at(0).kept);
  }
}

// Under "full" the CLS token is a visual token: 577 per crop, and every reducing method is
// refused by name rather than run on a patch geometry that leaves it out.
TEST(HfParity, FullStrategyRefusesReducingMethods) {
  if (!std::filesystem::exists(test::testdata_dir() + "/hf")) GTEST_SKIP() << "no HF parity data (ERA_HF_PARITY off)";
  const auto c = read_json(case_dir("llava15_full") + "/case.json");
  auto session = Session::open(c["bundle"].get<std::string>());
  EXPECT_EQ(session.info().tokens_per_crop, 577);
  Request req = request_for(c, c["images"][0]);
  req.max_new_tokens = 1;
  for (const char* method : {"era", "visionzip", "random"}) {
    req.reduction.method = method;
    req.reduction.tokens = 64;
    try {
      session.generate(req);
      ADD_FAILURE() << method << " ran on a CLS-keeping bundle";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << method;
      EXPECT_NE(std::string(e.what()).find(std::string("'") + method + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("vision_feature_select_strategy"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace era
