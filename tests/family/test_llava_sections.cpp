// The LLaVA families' manifest sections (family/llava_sections.h): the preprocessing mode, the Pillow
// filter and the CLIP resize edge are read and checked; anything unknown is refused naming the
// field (never ignored).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "era/error.h"
#include "family/llava_sections.h"
#include "model/manifest.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json base_image() {
  return {{"aspect_ratio", "pad"},
          {"size", 336},
          {"mean", {0.48145466, 0.4578275, 0.40821073}},
          {"std", {0.26862954, 0.26130258, 0.27577711}},
          {"pad_color", {122, 116, 104}}};
}

std::string refusal(const json& image) {
  try {
    parse_llava_image_spec(image.dump(), 336, "m.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    return e.what();
  }
  return "";
}

TEST(LlavaSections, BundlesWithoutTheNewFieldsKeepTheirMeaning) {
  // Exported before "shortest_edge" / a read "resample": straight to the crop size, bicubic, pad.
  const LlavaImageSpec im = parse_llava_image_spec(base_image().dump(), 336, "m.json");
  EXPECT_EQ(im.layout, ImageLayout::kPad);
  EXPECT_EQ(im.shortest_edge, 336);
  EXPECT_EQ(im.filter, PilFilter::kBicubic);
}

TEST(LlavaSections, ModesFiltersAndEdgeAreRead) {
  json j = base_image();
  j["aspect_ratio"] = "crop";
  j["resample"] = "bilinear";
  j["shortest_edge"] = 400;
  const LlavaImageSpec im = parse_llava_image_spec(j.dump(), 336, "m.json");
  EXPECT_EQ(im.layout, ImageLayout::kCrop);
  EXPECT_EQ(im.filter, PilFilter::kBilinear);
  EXPECT_EQ(im.shortest_edge, 400);
  j["resample"] = "lanczos";
  EXPECT_EQ(parse_llava_image_spec(j.dump(), 336, "m.json").filter, PilFilter::kLanczos);
}

TEST(LlavaSections, UnknownSettingsAreRefusedNamingTheField) {
  json j = base_image();
  j["aspect_ratio"] = "square";
  EXPECT_NE(refusal(j).find("image.aspect_ratio 'square'"), std::string::npos) << refusal(j);
  j = base_image();
  j["resample"] = "nearest";
  EXPECT_NE(refusal(j).find("image.resample 'nearest'"), std::string::npos) << refusal(j);
  j["resample"] = 3;  // the PIL id instead of the name
  EXPECT_NE(refusal(j).find("image.resample"), std::string::npos) << refusal(j);
  j = base_image();
  j["shortest_edge"] = 0;
  EXPECT_NE(refusal(j).find("image.shortest_edge"), std::string::npos) << refusal(j);
  j = base_image();
  j["aspect_ratio"] = "anyres";  // anyres needs its pinpoints
  EXPECT_NE(refusal(j).find("image.grid_pinpoints"), std::string::npos) << refusal(j);
  EXPECT_NE(refusal(json::array()).find("not an object"), std::string::npos);
}

// LLaVA-OneVision's token cap: "anyres_max_N" is read as N tiles; anything else is refused naming
// the field, and so is a cap on a layout without tiles.
TEST(LlavaSections, AnyresMaxTilesIsReadAndChecked) {
  json j = base_image();
  j["aspect_ratio"] = "anyres";
  j["grid_pinpoints"] = {{336, 672}, {672, 336}};
  EXPECT_EQ(parse_llava_image_spec(j.dump(), 336, "m.json").anyres_max_tiles, 0);
  j["vision_aspect_ratio"] = "anyres_max_9";
  EXPECT_EQ(parse_llava_image_spec(j.dump(), 336, "m.json").anyres_max_tiles, 9);
  for (const json& bad : {json("anyres_max_"), json("anyres_max_0"), json("anyres"), json("anyres_max_9x"), json(9)}) {
    j["vision_aspect_ratio"] = bad;
    EXPECT_NE(refusal(j).find("image.vision_aspect_ratio must be \"anyres_max_N\""), std::string::npos) << refusal(j);
  }
  json pad = base_image();
  pad["vision_aspect_ratio"] = "anyres_max_9";
  EXPECT_NE(refusal(pad).find("needs image.aspect_ratio \"anyres\""), std::string::npos) << refusal(pad);
}

// Through read_manifest and the family: a bundle whose mode is unknown does not load.
TEST(LlavaSections, ReadManifestRefusesAnUnknownMode) {
  const fs::path dir = test::scratch_dir_for_this_test();
  json m;
  {
    std::ifstream in(test::bundle_dir() + "/manifest.json");
    ASSERT_TRUE(in.good()) << "run the fixtures first";
    m = json::parse(in);
  }
  EXPECT_EQ(read_llava_sections(read_manifest(test::bundle_dir())).image.layout,
            ImageLayout::kPad);  // fixture.bundle: --image-mode pad
  m["image"]["aspect_ratio"] = "letterbox";
  std::ofstream(dir / "manifest.json") << m.dump();
  try {
    read_llava_sections(read_manifest(dir.string()));
    FAIL() << "an unknown image.aspect_ratio was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("image.aspect_ratio 'letterbox'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
}

// The projector's input width is the LLaVA families' knowledge (the tower's width x its feature
// layers), and a native-resolution field in a LLaVA bundle's video section is refused by name.
TEST(LlavaSections, ProjectorWidthAndForeignVideoFieldsAreRefusedByName) {
  json m;
  {
    std::ifstream in(test::bundle_dir() + "/manifest.json");
    ASSERT_TRUE(in.good()) << "run the fixtures first";
    m = json::parse(in);
  }
  const auto refusal_of = [](const json& manifest) -> std::string {
    try {
      read_llava_sections(parse_manifest(manifest.dump(), "m.json"));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal_of(m), "");
  json wide = m;
  wide["projector"]["in_features"] = 2 * m["projector"]["in_features"].get<int64_t>();
  EXPECT_NE(refusal_of(wide).find("projector.in_features"), std::string::npos) << refusal_of(wide);
  json native_video = m;
  native_video["tokens"]["video_token_id"] = 3;
  native_video["video"] = {
      {"size", m["vision"]["image_size"]}, {"mean", {0.5, 0.5, 0.5}}, {"std", {0.5, 0.5, 0.5}}, {"min_pixels", 3136}};
  EXPECT_NE(refusal_of(native_video).find("video.min_pixels"), std::string::npos) << refusal_of(native_video);
  native_video["video"].erase("min_pixels");
  EXPECT_EQ(refusal_of(native_video), "");
}

}  // namespace
}  // namespace era
