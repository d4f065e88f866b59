// The native-resolution (Qwen2.5-VL) fields of a manifest: the exporter's manifest of the tiny
// random bundle parses, and each broken field is one kBundle error naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "era/error.h"
#include "model/manifest.h"
#include "test_support.h"

namespace era {
namespace {

using nlohmann::json;

json qwen_manifest() { return json::parse(test::read_file(test::testdata_dir() + "/bundle-qwen2.5-vl/manifest.json")); }

void expect_refused(const json& manifest, const std::string& field) {
  try {
    parse_manifest(manifest.dump(), "manifest.json");
    ADD_FAILURE() << "accepted a manifest with a bad " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(ManifestNative, ExportedManifestParses) {
  const Manifest m = parse_manifest(qwen_manifest().dump(), "manifest.json");
  EXPECT_EQ(m.arch, "qwen2.5-vl");
  EXPECT_EQ(m.image.layout, ImageLayout::kNative);
  EXPECT_EQ(m.image.native.factor(), 28);
  EXPECT_EQ(m.text.mrope_section.size(), 3u);
  EXPECT_EQ(m.vision.spatial_merge_size, 2);
  EXPECT_EQ(m.vision.temporal_patch_size, 2);
  EXPECT_TRUE(m.video.present);
  EXPECT_GT(m.video.fps, 0);
  EXPECT_EQ(m.projector_in, 4 * m.vision.hidden_size);
}

TEST(ManifestNative, BrokenFieldsAreNamed) {
  json j = qwen_manifest();
  j["text"]["mrope_section"] = {1, 1, 1};
  expect_refused(j, "text.mrope_section");
  j = qwen_manifest();
  j["image"]["min_pixels"] = j["image"]["max_pixels"].get<int64_t>() + 1;
  expect_refused(j, "image.max_pixels");
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

}  // namespace
}  // namespace era
