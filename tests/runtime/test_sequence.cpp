// The spliced decoder input: image tokens exactly where the placeholders were, text embeddings
// unchanged around them, compacted positions, LAR bias only on image keys.
#include <gtest/gtest.h>

#include "era/error.h"
#include "model/bundle.h"
#include "runtime/sequence.h"
#include "test_support.h"

namespace era {
namespace {

TEST(Sequence, TwoImagesAreSplicedInPlace) {
  c10::InferenceMode guard;
  auto bundle = load_bundle(test::bundle_dir(), torch::kCPU);
  Decoder dec(bundle);
  const int64_t img = bundle.manifest.tokens.image_token_id;
  const int64_t d = bundle.manifest.text.hidden_size;
  const std::vector<int64_t> ids{1, 5, 6, img, 7, img, 8};
  ReducedTokens a{torch::full({3, d}, 1.5f), torch::tensor({0.1f, 0.2f, 0.3f}), {0, 1, 2}, {}, {}, {}};
  ReducedTokens b{torch::full({2, d}, -2.5f), torch::tensor({0.4f, 0.5f}), {4, 9}, {}, {}, {}};
  const auto seq = build_sequence(dec, ids, img, -1, {a, b});

  ASSERT_EQ(seq.length(), 5 + 3 + 2);
  EXPECT_EQ(seq.visual_tokens(), 5);
  EXPECT_EQ(seq.text_tokens(), 5);
  const auto text = dec.embed(torch::tensor(ids).unsqueeze(0))[0];
  const auto e = seq.embeds[0];
  // Layout: [1 5 6] [A A A] [7] [B B] [8]
  EXPECT_TRUE(torch::equal(e.slice(0, 0, 3), text.slice(0, 0, 3)));
  EXPECT_TRUE(torch::equal(e.slice(0, 3, 6), a.embeddings));
  EXPECT_TRUE(torch::equal(e[6], text[4]));
  EXPECT_TRUE(torch::equal(e.slice(0, 7, 9), b.embeddings));
  EXPECT_TRUE(torch::equal(e[9], text[6]));
  EXPECT_TRUE(torch::equal(seq.positions[0], torch::arange(10)));
  const auto bias = seq.key_log_bias[0];
  EXPECT_TRUE(torch::allclose(bias, torch::tensor({0.f, 0.f, 0.f, 0.1f, 0.2f, 0.3f, 0.f, 0.4f, 0.5f, 0.f})));
  ASSERT_EQ(seq.segments.size(), 5u);
  EXPECT_EQ(seq.segments[1].kind, SequenceSegment::Kind::kImage);
  EXPECT_EQ(seq.segments[1].start, 3);
  EXPECT_EQ(seq.segments[3].image_index, 1);
  EXPECT_EQ(seq.segments[3].start, 7);

  EXPECT_THROW(build_sequence(dec, ids, img, -1, {a}), Error);
}

// A video's placeholder id is a visual item like an image's: items fill the placeholders in prompt
// order whatever their kind; without a video id (-1) that id is text.
TEST(Sequence, ImageAndVideoPlaceholdersTakeTheItemsInPromptOrder) {
  c10::InferenceMode guard;
  auto bundle = load_bundle(test::bundle_dir(), torch::kCPU);
  Decoder dec(bundle);
  const int64_t img = bundle.manifest.tokens.image_token_id, vid = 9;
  const int64_t d = bundle.manifest.text.hidden_size;
  const std::vector<int64_t> ids{1, vid, 5, img, 8};
  ReducedTokens video{torch::full({4, d}, 0.5f), torch::zeros({4}), {0, 1, 2, -1}, {}, {}, {}};
  ReducedTokens image{torch::full({2, d}, -1.0f), torch::zeros({2}), {3, 7}, {}, {}, {}};
  const auto seq = build_sequence(dec, ids, img, vid, {video, image});
  ASSERT_EQ(seq.length(), 3 + 4 + 2);
  EXPECT_EQ(seq.visual_tokens(), 6);
  EXPECT_TRUE(torch::equal(seq.embeds[0].slice(0, 1, 5), video.embeddings));
  EXPECT_TRUE(torch::equal(seq.embeds[0].slice(0, 6, 8), image.embeddings));
  EXPECT_EQ(seq.segments[1].image_index, 0);
  EXPECT_EQ(seq.segments[3].image_index, 1);
  // the same ids for a model without video: 9 is a text token and one item is too many
  EXPECT_THROW(build_sequence(dec, ids, img, -1, {video, image}), Error);
  EXPECT_EQ(build_sequence(dec, ids, img, -1, {image}).length(), 4 + 2);
}

}  // namespace
}  // namespace era
