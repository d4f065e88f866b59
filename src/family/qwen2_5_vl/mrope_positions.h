#pragma once
// Internal header. Multimodal RoPE positions (Qwen2.5-VL) of a spliced prompt sequence, as
// transformers' get_rope_index numbers them: text runs count up on all three axes; an image or
// video of token grid (t, h, w) starting at position s puts the token (i, j, k) at
// (s + i * time_step, s + j, s + k), and the text after it starts at s + max(h, w).
//
// A reduced item: each kept token keeps the position of its original grid index (its `kept`
// entry) and the text after it starts where it would have without reduction ("original", the
// Qwen pruning runtimes' choice), or the item's tokens count up like text ("compact").
#include <torch/script.h>

#include "runtime/sequence.h"

namespace era {

// int64 [1, L, 3] (temporal, height, width).
torch::Tensor mrope_positions(const PromptSequence& sequence);

}  // namespace era
