// The manifest's "image" section: the preprocessing mode, the Pillow filter and the CLIP resize
// edge are read and checked; anything unknown is refused naming the field (never ignored).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "era/error.h"
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
    parse_image_spec(image.dump(), 336, "m.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    return e.what();
  }
  return "";
}

TEST(ManifestImage, BundlesWithoutTheNewFieldsKeepTheirMeaning) {
  // Exported before "shortest_edge" / a read "resample": straight to the crop size, bicubic, pad.
  const ImageSpec im = parse_image_spec(base_image().dump(), 336, "m.json");
  EXPECT_EQ(im.layout, ImageLayout::kPad);
  EXPECT_EQ(im.shortest_edge, 336);
  EXPECT_EQ(im.filter, PilFilter::kBicubic);
}

TEST(ManifestImage, ModesFiltersAndEdgeAreRead) {
  json j = base_image();
  j["aspect_ratio"] = "crop";
  j["resample"] = "bilinear";
  j["shortest_edge"] = 400;
  const ImageSpec im = parse_image_spec(j.dump(), 336, "m.json");
  EXPECT_EQ(im.layout, ImageLayout::kCrop);
  EXPECT_EQ(im.filter, PilFilter::kBilinear);
  EXPECT_EQ(im.shortest_edge, 400);
  j["resample"] = "lanczos";
  EXPECT_EQ(parse_image_spec(j.dump(), 336, "m.json").filter, PilFilter::kLanczos);
}

TEST(ManifestImage, UnknownSettingsAreRefusedNamingTheField) {
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
TEST(ManifestImage, AnyresMaxTilesIsReadAndChecked) {
  json j = base_image();
  j["aspect_ratio"] = "anyres";
  j["grid_pinpoints"] = {{336, 672}, {672, 336}};
  EXPECT_EQ(parse_image_spec(j.dump(), 336, "m.json").anyres_max_tiles, 0);
  j["vision_aspect_ratio"] = "anyres_max_9";
  EXPECT_EQ(parse_image_spec(j.dump(), 336, "m.json").anyres_max_tiles, 9);
  for (const json& bad : {json("anyres_max_"), json("anyres_max_0"), json("anyres"), json("anyres_max_9x"), json(9)}) {
    j["vision_aspect_ratio"] = bad;
    EXPECT_NE(refusal(j).find("image.vision_aspect_ratio must be \"anyres_max_N\""), std::string::npos) << refusal(j);
  }
  json pad = base_image();
  pad["vision_aspect_ratio"] = "anyres_max_9";
  EXPECT_NE(refusal(pad).find("needs image.aspect_ratio \"anyres\""), std::string::npos) << refusal(pad);
}

// Through read_manifest: a bundle whose mode is unknown does not load.
TEST(ManifestImage, ReadManifestRefusesAnUnknownMode) {
  const fs::path dir = test::scratch_dir_for_this_test();
  json m;
  {
    std::ifstream in(test::bundle_dir() + "/manifest.json");
    ASSERT_TRUE(in.good()) << "run the fixtures first";
    m = json::parse(in);
  }
  EXPECT_EQ(read_manifest(test::bundle_dir()).image.layout, ImageLayout::kPad);  // fixture.bundle: --image-mode pad
  m["image"]["aspect_ratio"] = "letterbox";
  std::ofstream(dir / "manifest.json") << m.dump();
  try {
    read_manifest(dir.string());
    FAIL() << "an unknown image.aspect_ratio was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("image.aspect_ratio 'letterbox'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace era
