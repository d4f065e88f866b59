#pragma once
// Stage 4: the decoder's input sequence. Text embeddings and each image's (reduced) visual tokens
// are spliced where the prompt's image placeholders were; positions are compacted 0..L-1 and
// every position carries its LAR key bias (0 for text).
#include <torch/script.h>

#include <array>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "reduce/reducer.h"

namespace era {

struct SequenceSegment {
  enum class Kind { kText, kImage } kind;
  int64_t start;  // first position in the sequence
  int64_t length;
  int image_index = -1;  // for image segments
  // Native-resolution items (image segments): the item's token grid (t, h, w), the original grid
  // index of each token in the segment, and the M-RoPE time step (ReducedTokens' fields).
  std::array<int64_t, 3> token_grid{0, 0, 0};
  std::vector<int64_t> kept{};
  int64_t time_step = 1;
};

struct PromptSequence {
  torch::Tensor embeds;        // [1, L, D] model dtype
  torch::Tensor positions;     // [1, L] int64, or [1, L, 3] (t, h, w) under multimodal RoPE
  torch::Tensor key_log_bias;  // [1, L] float32
  std::vector<SequenceSegment> segments;
  // Multimodal RoPE: reduced items take consecutive positions instead of their original ones.
  bool compact_positions = false;
  int64_t length() const { return embeds.size(1); }
  // The position of the first generated token: one past the largest position of the prompt
  // (= length() for 0..L-1; transformers' rope_deltas under multimodal RoPE).
  int64_t next_position() const;
  int64_t visual_tokens() const;
  int64_t text_tokens() const { return length() - visual_tokens(); }
};

// `ids` holds one placeholder id per visual item (an image's `image_token_id`, a video's
// `video_token_id`; -1 when the model takes no video), in order; `items[i]` replaces the i-th.
PromptSequence build_sequence(Decoder& decoder, const std::vector<int64_t>& ids, int64_t image_token_id, int64_t video_token_id,
                              const std::vector<ReducedTokens>& items);

}  // namespace era
