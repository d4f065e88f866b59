// Qwen2.5-VL's FLOP formulas (era_bench), counted by hand: one 4 x 6 patch image, temporal patch 2,
// 2 x 2 merge, windows of 2 x 2 merge units (a 16-patch and an 8-patch window), one of the two
// layers attending to the whole image.
#include <gtest/gtest.h>

#include "family/qwen2_5_vl/qwen2_5_vl_family.h"
#include "family/qwen2_5_vl/qwen_sections.h"
#include "model/manifest.h"
#include "test_support.h"

namespace era {
namespace {

Manifest tiny_native_manifest() {
  Manifest m;
  m.arch = "qwen2.5-vl";
  m.vision.patch_size = 14;
  m.vision.hidden_size = 4;
  m.vision.intermediate_size = 8;
  m.vision.num_layers = 2;
  m.vision.layers_run = 2;
  m.text.hidden_size = 10;
  return m;
}

Qwen25VlSections tiny_native_sections() {
  Qwen25VlSections s;
  s.fullatt_block_indexes = std::vector<int64_t>{1};
  s.spatial_merge_size = 2;
  s.window_size = 2 * 2 * 14;  // 2 merge units a side
  s.temporal_patch_size = 2;
  return s;
}

TEST(QwenVisionCost, NativeTowerByHand) {
  const VisionCost cost = qwen25vl_tower_cost(tiny_native_manifest(), tiny_native_sections());
  const ItemGrids grids{{1, 4, 6}};
  const double embed = 2.0 * 24 * (3 * 2 * 14 * 14) * 4;             // 24 patches
  const double dense = 2 * (2.0 * 24 * (4 * 16 + 3 * 4 * 8));        // q/k/v/o + gated MLP, 2 layers
  const double attention = 4.0 * 4 * (24 * 24 + (16 * 16 + 8 * 8));  // full layer + window layer
  EXPECT_DOUBLE_EQ(cost.vision(0, grids), embed + dense + attention);
  EXPECT_DOUBLE_EQ(cost.projector(0, grids), 2.0 * 6 * (16 * 16 + 16 * 10));  // 6 merged tokens
}

// The registry hands era_bench the family's formulas by the manifest's arch.
TEST(QwenVisionCost, TheRegistryGivesTheFamilysFormulas) {
  const ItemGrids grids{{2, 8, 4}};
  const Manifest m = parse_manifest(test::read_file(test::testdata_dir() + "/bundle-qwen2.5-vl/manifest.json"), "manifest.json");
  const double expected = qwen25vl_tower_cost(m, read_qwen25vl_sections(m)).vision(0, grids);
  EXPECT_GT(expected, 0);
  EXPECT_DOUBLE_EQ(vision_cost(m).vision(0, grids), expected);
  // a Manifest made by hand has no sections to read: an error, not a crash
  EXPECT_THROW(vision_cost(tiny_native_manifest()), Error);
  Manifest unknown = m;
  unknown.arch = "no-such-family";
  EXPECT_THROW(vision_cost(unknown), Error);
}

}  // namespace
}  // namespace era
