// Qwen2.5-VL's own manifest sections (family/qwen2_5_vl/qwen_sections.h) over the common manifest:
// the exporter's manifest of the tiny random bundle parses, and each broken field, common or the
// family's, is one kBundle error naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>

#include "era/error.h"
#include "family/qwen2_5_vl/qwen_sections.h"
#include "model/manifest.h"
#include "test_support.h"

namespace era {
namespace {

using nlohmann::json;

json qwen_manifest() { return json::parse(test::read_file(test::testdata_dir() + "/bundle-qwen2.5-vl/manifest.json")); }

// The common manifest, then the family's sections: what a bundle load reads.
Qwen25VlSections read_all(const json& manifest) {
  return read_qwen25vl_sections(parse_manifest(manifest.dump(), "manifest.json"));
}

void expect_refused(const json& manifest, const std::string& field) {
  try {
    read_all(manifest);
    ADD_FAILURE() << "accepted a manifest with a bad " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(QwenSections, ExportedManifestParses) {
  const Manifest m = parse_manifest(qwen_manifest().dump(), "manifest.json");
  const Qwen25VlSections s = read_qwen25vl_sections(m);
  EXPECT_EQ(m.arch, "qwen2.5-vl");
  EXPECT_EQ(s.image.native.factor(), 28);
  EXPECT_EQ(m.text.mrope_section.size(), 3u);
  EXPECT_EQ(s.spatial_merge_size, 2);
  EXPECT_EQ(s.temporal_patch_size, 2);
  ASSERT_TRUE(s.video.has_value());
  EXPECT_TRUE(m.has_video);
  EXPECT_GT(s.video->fps, 0);
  EXPECT_EQ(m.projector_in, 4 * m.vision.hidden_size);
  EXPECT_GE(s.vision_start_id, 0);
  EXPECT_GE(s.vision_end_id, 0);
}

// The common manifest reads no section of a family: a Qwen field broken beyond use still parses
// there, and the family refuses it naming the field (what a bundle load does, before the modules).
TEST(QwenSections, TheCommonManifestLeavesTheFamilysFieldsToIt) {
  json j = qwen_manifest();
  j["vision"]["spatial_merge_size"] = "two";
  j["image"]["min_pixels"] = -1;
  const Manifest m = parse_manifest(j.dump(), "manifest.json");
  EXPECT_EQ(m.vision.hidden_size, qwen_manifest()["vision"]["hidden_size"].get<int64_t>());
  expect_refused(j, "vision.spatial_merge_size = \"two\"");
  // without the video section the family takes no video
  json no_video = qwen_manifest();
  no_video.erase("video");
  EXPECT_FALSE(read_all(no_video).video.has_value());
  // a LLaVA layout is not this family's
  json crop = qwen_manifest();
  crop["image"]["aspect_ratio"] = "crop";
  expect_refused(crop, "image.aspect_ratio 'crop' does not fit architecture qwen2.5-vl");
}

TEST(QwenSections, BrokenFieldsAreNamed) {
  json j = qwen_manifest();
  j["text"]["mrope_section"] = {1, 1, 1};
  expect_refused(j, "text.mrope_section");
  j = qwen_manifest();
  j["image"]["min_pixels"] = j["image"]["max_pixels"].get<int64_t>() + 1;
  expect_refused(j,
                 "image.min_pixels = " + std::to_string(j["image"]["min_pixels"].get<int64_t>()) + ": is above image.max_pixels");
  j = qwen_manifest();
  j["image"]["resize_arithmetic"] = "cubic";
  expect_refused(j, "image.resize_arithmetic");
  j = qwen_manifest();
  j["video"].erase("fps");
  expect_refused(j, "video.fps");
  j = qwen_manifest();
  j["projector"]["in_features"] = j["vision"]["hidden_size"];  // without the 2x2 merge
  expect_refused(j, "projector");
  j = qwen_manifest();
  j["image"]["aspect_ratio"] = "stretch";
  expect_refused(j, "image.aspect_ratio");
}

// min_pixels above max_pixels: the pair is named, min_pixels first (the refusal used to read
// "image.max_pixels = 1003520: must be an integer from 1003521 to ...", blaming max_pixels alone).
TEST(QwenSections, MinPixelsAboveMaxPixelsNamesThePair) {
  for (const std::string section : {"image", "video"}) {
    json j = qwen_manifest();
    j[section]["min_pixels"] = 5000;
    j[section]["max_pixels"] = 4000;
    try {
      read_all(j);
      ADD_FAILURE() << section << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(section + ".min_pixels = 5000: is above " + section + ".max_pixels 4000"),
                std::string::npos)
          << e.what();
    }
  }
}

// Fields era used to skip: the video processor's frame bounds are read (and used by per-second
// sampling); the vision window, full-attention blocks, projector inner width, out_hidden_size,
// RoPE base and RMSNorm epsilon are read to be checked (against each other here, against the
// modules at load: tests/model/test_bundle_validation.cpp).
TEST(QwenSections, FieldsBakedIntoTheModulesAreReadAndChecked) {
  json j = qwen_manifest();
  j["video"]["min_frames"] = 6;
  j["video"]["max_frames"] = 100;
  const Manifest m = parse_manifest(j.dump(), "manifest.json");
  const Qwen25VlSections s = read_qwen25vl_sections(m);
  ASSERT_TRUE(s.video.has_value());
  EXPECT_EQ(s.video->min_frames, 6);
  EXPECT_EQ(s.video->max_frames, 100);
  EXPECT_EQ(s.window_size, 112);
  ASSERT_TRUE(s.fullatt_block_indexes.has_value());
  EXPECT_EQ(*s.fullatt_block_indexes, (std::vector<int64_t>{1, 3}));
  EXPECT_DOUBLE_EQ(m.text.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(m.text.rms_norm_eps, 1e-6);
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& k) { k["video"]["max_frames"] = 2; }, "video.max_frames = 2: must be an integer from 4 to 1024"},
      {[](json& k) {
         k["vision"]["fullatt_block_indexes"] = {1, 4};
       },
       "vision.fullatt_block_indexes[1] = 4"},
      {[](json& k) { k["vision"]["window_size"] = -112; }, "vision.window_size = -112"},
      {[](json& k) { k["projector"]["hidden_features"] = 64; },
       "projector.hidden_features = 64: must equal projector.in_features 128"},
      {[](json& k) { k["vision"]["out_hidden_size"] = 32; }, "vision.out_hidden_size = 32: must equal projector.out_features 64"},
      {[](json& k) { k["text"]["rope_theta"] = 0; }, "text.rope_theta = 0: must be a number above 0"},
      {[](json& k) { k["text"]["rms_norm_eps"] = "1e-6"; }, "text.rms_norm_eps = \"1e-6\""},
  };
  for (const auto& [edit, needle] : cases) {
    json k = qwen_manifest();
    edit(k);
    expect_refused(k, needle);
  }
}

}  // namespace
}  // namespace era
