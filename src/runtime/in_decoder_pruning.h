#pragma once
// Running in-decoder visual-token pruning (FastV, DART; the selections are reduce/fastv.h and
// reduce/dart.h).
//
// Unlike the pre-LLM reducers (reduce/reducer.h), these methods see every visual token in decoder
// layers 0..K-1 and choose, from what layer K-1 computed, which image tokens layers K.. keep.
// This is the official KV-cache version (FastV's `fastv_forward`, DART's hook): the choice is made
// once, in prefill. Layers < K keep the whole prompt in their KV cache, layers >= K only the kept
// tokens (at slots 0..L'-1); kept tokens keep their ORIGINAL RoPE positions (gaps) and every
// decode step runs at position L + t through both groups, so the two groups' caches grow side by
// side (KvCache's per-layer lengths). Nothing is copied or recomputed per step.
//
// Only image tokens are dropped; text is always kept. The budget applies per image span (a prompt
// with two images prunes each image's span to its own budget). On LLaVA-NeXT an image's span is
// the whole packed sequence (base + unpadded grid + newline tokens) and the budget is the total
// kept for it (the official "global" extension).
#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "model/kv_cache.h"
#include "reduce/in_decoder_pruner.h"
#include "runtime/sequence.h"

namespace era {

// A pruner and the image spans of one prompt sequence.
struct InDecoderPruning {
  const InDecoderPruner* pruner = nullptr;
  std::vector<ImageSpan> spans;
};

struct PrunedPrefill {
  torch::Tensor logits;                            // [1, 1, V] float32, last prompt position
  std::vector<int64_t> kept_positions;             // the L' positions layers >= K hold, ascending
  std::vector<std::vector<int64_t>> kept_in_span;  // per span: kept offsets inside it, ascending
  int64_t visual_tokens = 0;                       // image tokens layers >= K see
};

// Prefill of `sequence` (batch 1) into an empty `cache`: layers [0, K) on everything, the
// selection, layers [K, N) on the kept positions (original RoPE positions and LAR biases).
PrunedPrefill prefill_pruned(Decoder& decoder, const PromptSequence& sequence, const InDecoderPruning& pruning, KvCache& cache,
                             const LarSettings& lar = {});

// One decode step on a cache prefill_pruned filled: `embeds` [1, 1, D] at RoPE `position`
// (original length + t) through layers [0, K) and then [K, N). Returns float32 logits [1, 1, V].
torch::Tensor decode_pruned(Decoder& decoder, const torch::Tensor& embeds, int64_t position, int64_t layer, KvCache& cache,
                            const LarSettings& lar = {});

}  // namespace era
