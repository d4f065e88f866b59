// LLaVA-OneVision packing: the anyres_max_N grid rule (transformers' ratio > 1.1 and
// int(h // ratio)), the packed sequence without a downscale equal to LLaVA-NeXT's, and with one:
// its length, the base tokens first, one newline per row, a constant grid staying constant, and
// the bookkeeping (kept, off_grid, assignment). Exact values against transformers are
// HfParity.OnevisionImagesAnyresMax9's job.
#include "family/llava_onevision/onevision_packing.h"

#include <gtest/gtest.h>

#include "era/error.h"

namespace era {
namespace {

TEST(OnevisionPacking, AnyresMaxGridFollowsTransformers) {
  // 4x3 tiles of 27x27 (1152x1536 px at 384): 108x81 tokens are 1.15 x 9 tiles' worth -> 93x70
  EXPECT_EQ(anyres_max_grid(108, 81, 9, 27), (std::array<int64_t, 2>{93, 70}));
  EXPECT_EQ(anyres_max_grid(81, 81, 9, 27), (std::array<int64_t, 2>{81, 81}));      // exactly 9 tiles: kept
  EXPECT_EQ(anyres_max_grid(88, 88, 9, 27), (std::array<int64_t, 2>{88, 88}));      // ratio 1.086 <= 1.1: kept
  EXPECT_EQ(anyres_max_grid(162, 162, 9, 27), (std::array<int64_t, 2>{81, 81}));    // 6x6 tiles: ratio 2
  EXPECT_EQ(anyres_max_grid(162, 162, 0, 27), (std::array<int64_t, 2>{162, 162}));  // no cap (NeXT)
}

AnyresGeometry square_grid(int64_t rows, int64_t cols, int64_t p) {
  AnyresGeometry g;
  g.original = {rows * 100, cols * 100};  // the grid's own aspect: nothing to unpad
  g.rows = rows;
  g.cols = cols;
  g.patches_per_side = p;
  return g;
}

TEST(OnevisionPacking, WithoutADownscaleItIsNextsPacking) {
  const AnyresGeometry g = square_grid(2, 3, 3);
  const torch::Tensor crops = torch::randn({7, 9, 5}), newline = torch::randn({5});
  const ReducedTokens got = pack_anyres_max(crops, g, /*max_tiles=*/9, newline);
  ReductionInput all;
  all.embeddings = crops.flatten(0, 1);
  const ReducedTokens want = pack_anyres(FullReducer().reduce(all), g, newline);
  EXPECT_TRUE(torch::equal(got.embeddings, want.embeddings));
  EXPECT_EQ(got.kept, want.kept);
  EXPECT_EQ(got.assignment, want.assignment);
}

TEST(OnevisionPacking, ADownscaledGridKeepsBaseFirstAndANewlinePerRow) {
  const int64_t p = 3, d = 4;
  const AnyresGeometry g = square_grid(2, 2, p);  // 6x6 tokens, cap 1 tile (9): ratio 2 -> 3x3
  torch::Tensor crops = torch::randn({5, p * p, d});
  const torch::Tensor channel = torch::tensor({1.5f, -2.0f, 0.25f, 7.0f});
  crops.slice(0, 1) = channel.expand({4, p * p, d});  // every tile token the same vector
  const torch::Tensor newline = torch::full({d}, 42.0f);
  const ReducedTokens out = pack_anyres_max(crops, g, /*max_tiles=*/1, newline);
  ASSERT_EQ(out.embeddings.size(0), p * p + 3 * 4);
  EXPECT_TRUE(torch::equal(out.embeddings.slice(0, 0, p * p), crops[0]));
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      const int64_t slot = p * p + r * 4 + c;
      const torch::Tensor want = c == 3 ? newline : channel;
      EXPECT_TRUE(torch::allclose(out.embeddings[slot], want, 1e-6, 1e-6)) << "row " << r << " col " << c;
      EXPECT_EQ(out.kept[static_cast<size_t>(slot)], -1);
      EXPECT_EQ(out.off_grid[static_cast<size_t>(slot)], c < 3);  // downscaled tokens have no patch; newlines do not count
    }
  }
  for (int64_t i = 0; i < p * p; ++i) EXPECT_EQ(out.kept[static_cast<size_t>(i)], i);
  ASSERT_EQ(out.assignment.size(), static_cast<size_t>(5 * p * p));
  EXPECT_EQ(out.assignment[3], 3);
  EXPECT_EQ(out.assignment[p * p + 1], -1);  // a tile token is in no single slot
  EXPECT_TRUE(torch::equal(out.log_bias, torch::zeros({out.embeddings.size(0)})));
}

TEST(OnevisionPacking, WrongCropCountIsRefused) {
  EXPECT_THROW(pack_anyres_max(torch::zeros({4, 9, 2}), square_grid(2, 2, 3), 1, torch::zeros({2})), Error);
}

TEST(OnevisionPacking, AppendNewlineAddsOneUnbiasedToken) {
  ReducedTokens t;
  t.embeddings = torch::randn({3, 2});
  t.log_bias = torch::tensor({0.1f, 0.2f, 0.3f});
  t.kept = {0, 4, 7};
  const ReducedTokens out = append_newline(t, torch::tensor({5.0f, 6.0f}));
  ASSERT_EQ(out.embeddings.size(0), 4);
  EXPECT_TRUE(torch::equal(out.embeddings[3], torch::tensor({5.0f, 6.0f})));
  EXPECT_TRUE(torch::equal(out.log_bias, torch::tensor({0.1f, 0.2f, 0.3f, 0.0f})));
  EXPECT_EQ(out.kept, (std::vector<int64_t>{0, 4, 7, -1}));
}

}  // namespace
}  // namespace era
