// Multimodal RoPE positions (Qwen2.5-VL): transformers' get_rope_index rule (text counts up on
// all three axes; an item of token grid (t, h, w) at start s puts token (i, j, k) at
// (s + i * step, s + j, s + k) and the text after it starts at s + max(h, w)), written out by hand
// here; a reduced item keeps its tokens' original positions, or counts up ("compact"). Parity with
// transformers' own position ids: tests/model/test_hf_parity.cpp (qwen cases).
#include <gtest/gtest.h>

#include "family/qwen2_5_vl/mrope_positions.h"

namespace era {
namespace {

PromptSequence sequence_of(const std::vector<SequenceSegment>& segments) {
  PromptSequence seq;
  int64_t length = 0;
  for (const auto& s : segments) length = std::max(length, s.start + s.length);
  seq.embeds = torch::zeros({1, length, 4});
  seq.segments = segments;
  return seq;
}

SequenceSegment text(int64_t start, int64_t length) { return {SequenceSegment::Kind::kText, start, length}; }

SequenceSegment item(int64_t start, std::array<int64_t, 3> grid, std::vector<int64_t> kept, int64_t step = 1) {
  SequenceSegment s{SequenceSegment::Kind::kImage, start, static_cast<int64_t>(kept.size()), 0};
  s.token_grid = grid;
  s.kept = std::move(kept);
  s.time_step = step;
  return s;
}

std::vector<std::array<int64_t, 3>> rows(const torch::Tensor& positions) {
  std::vector<std::array<int64_t, 3>> out;
  for (int64_t i = 0; i < positions.size(1); ++i)
    out.push_back({positions[0][i][0].item<int64_t>(), positions[0][i][1].item<int64_t>(), positions[0][i][2].item<int64_t>()});
  return out;
}

TEST(MropePositions, FullImageThenTextAsGetRopeIndex) {
  // 3 text tokens, a 2 x 3 token image, 2 text tokens
  const auto got = rows(mrope_positions(sequence_of({text(0, 3), item(3, {1, 2, 3}, {0, 1, 2, 3, 4, 5}), text(9, 2)})));
  const std::vector<std::array<int64_t, 3>> want = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {3, 3, 4}, {3, 3, 5},
                                                    {3, 4, 3}, {3, 4, 4}, {3, 4, 5}, {6, 6, 6}, {7, 7, 7}};
  EXPECT_EQ(got, want);
}

TEST(MropePositions, ReducedImageKeepsOriginalPositionsAndTheTextAfterIt) {
  PromptSequence seq = sequence_of({text(0, 3), item(3, {1, 2, 3}, {1, 5}), text(5, 2)});
  const std::vector<std::array<int64_t, 3>> want = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 4}, {3, 4, 5}, {6, 6, 6}, {7, 7, 7}};
  EXPECT_EQ(rows(mrope_positions(seq)), want);
  seq.compact_positions = true;  // the alternative: the two kept tokens count up like text
  const std::vector<std::array<int64_t, 3>> compact = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3},
                                                       {4, 4, 4}, {5, 5, 5}, {6, 6, 6}};
  EXPECT_EQ(rows(mrope_positions(seq)), compact);
  EXPECT_EQ(seq.next_position(), 7);  // no positions set yet: the length is the fallback
}

TEST(MropePositions, VideoTimeStepsAndTheNextPosition) {
  // 1 text token, a video of 3 temporal patches x 1 x 2 tokens with time step 2, 1 text token
  PromptSequence seq = sequence_of({text(0, 1), item(1, {3, 1, 2}, {0, 1, 2, 3, 4, 5}, 2), text(7, 1)});
  seq.positions = mrope_positions(seq);
  const std::vector<std::array<int64_t, 3>> want = {{0, 0, 0}, {1, 1, 1}, {1, 1, 2}, {3, 1, 1},
                                                    {3, 1, 2}, {5, 1, 1}, {5, 1, 2}, {3, 3, 3}};
  EXPECT_EQ(rows(seq.positions), want);
  // decoding goes on one past the largest position (transformers' rope_deltas), not at the length
  EXPECT_EQ(seq.next_position(), 6);
}

TEST(MropePositions, KeptIndexOutsideTheGridIsAnError) {
  EXPECT_THROW(mrope_positions(sequence_of({item(0, {1, 2, 2}, {0, 4})})), Error);
}

}  // namespace
}  // namespace era
