// era's C++ preprocessing vs Hugging Face transformers' own image processors (CLIPImageProcessor,
// LlavaImageProcessor with and without do_pad, LlavaNextImageProcessor, LlavaOnevisionImageProcessor
// at 384 px over its 36 pinpoints, which is the anyres mode at that tile size; PIL backend), bit for
// bit, through the exporter's reading of the processor's preprocessor_config.json. Fixture:
// tests/python/make_hf_image_refs.py (needs transformers: registered only with ERA_HF_PARITY).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "family/anyres.h"
#include "family/clip_preprocess.h"
#include "family/llava_base.h"
#include "family/llava_sections.h"
#include "image/image_test_util.h"

namespace era {
namespace {

using test::describe_mismatch;
using test::mat_from_hwc;

std::string hf_dir() { return test::testdata_dir() + "/hf_image"; }

nlohmann::json hf_index() {
  std::ifstream in(hf_dir() + "/index.json");
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(in);
}

// The pixel tensor era's families build: the crops of the manifest's layout, each normalised.
torch::Tensor era_pixels(const cv::Mat& rgb, const LlavaImageSpec& spec) {
  const ClipImageConfig clip = clip_config(spec);
  const std::vector<cv::Mat> crops = spec.layout == ImageLayout::kAnyres ? llava_next_crops(rgb, spec.grid_pinpoints, clip)
                                                                         : std::vector<cv::Mat>{llava15_crop(rgb, clip)};
  std::vector<torch::Tensor> planes;
  for (const cv::Mat& crop : crops) planes.push_back(normalize_to_chw(crop, clip));
  return torch::stack(planes);
}

TEST(HfPreprocess, PixelValuesBitExactWithTransformers) {
  const nlohmann::json index = hf_index();
  ASSERT_FALSE(index.is_null()) << "missing " << hf_dir() << "/index.json; run " ERA_SOURCE_DIR
                                << "/tests/python/make_hf_image_refs.py --out " << hf_dir();
  std::set<std::string> modes, filters;
  int images = 0;
  for (const auto& c : index) {
    const std::string name = c["name"];
    SCOPED_TRACE(name + " (" + c["processor"].get<std::string>() + ")");
    const LlavaImageSpec spec = parse_llava_image_spec(c["image"].dump(), c["vision_image_size"], name);
    // The exporter chose the mode transformers' processor implies.
    EXPECT_EQ(spec.aspect_ratio, c["expect_mode"].get<std::string>());
    modes.insert(spec.aspect_ratio);
    filters.insert(spec.resample);
    for (const auto& im : c["images"]) {
      SCOPED_TRACE(std::to_string(im["width"].get<int>()) + "x" + std::to_string(im["height"].get<int>()));
      const cv::Mat rgb = mat_from_hwc(read_npy(hf_dir() + "/" + im["rgb"].get<std::string>()));
      const torch::Tensor want = read_npy(hf_dir() + "/" + im["pixels"].get<std::string>());
      EXPECT_EQ(describe_mismatch(era_pixels(rgb, spec), want), "");
      ++images;
    }
  }
  EXPECT_EQ(modes, (std::set<std::string>{"pad", "crop", "anyres"}));
  EXPECT_GE(filters.size(), 4u);
  EXPECT_GE(images, 60);
}

}  // namespace
}  // namespace era
