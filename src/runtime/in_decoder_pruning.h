#pragma once
// In-decoder visual-token pruning: FastV and DART (/work/shared/reference/baselines.md §2, §6).
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
#include "reduce/baseline_options.h"
#include "runtime/sequence.h"

namespace era {

// One image's tokens in the prompt sequence and how many of them layers >= K keep.
struct ImageSpan {
  int64_t start = 0;   // first sequence position
  int64_t length = 0;  // tokens
  int64_t budget = 0;  // tokens to keep; <= 0 or >= length keeps all
};

// What the selection reads from layer K-1 (batch 1, prompt length L). Only the fields the
// pruner asked for are defined.
struct PruningSignals {
  torch::Tensor attention;      // [H, L] float32: the last prompt token's attention logits (LAR bias included)
  torch::Tensor keys;           // [L, H*d]: post-RoPE keys, heads concatenated (GQA kv heads repeated)
  torch::Tensor normed_hidden;  // [L, D]: layer K-1's output through the final RMSNorm
};

class InDecoderPruner {
 public:
  virtual ~InDecoderPruner() = default;
  virtual std::string name() const = 0;
  virtual int64_t layer() const = 0;  // K: the first layer that sees only the kept tokens
  virtual bool needs_attention() const = 0;
  virtual bool needs_keys_and_hidden() const = 0;
  // Sequence positions inside `span` kept from layer K on, ascending. `text_after`: the text
  // positions after the span (ascending; other images' tokens excluded).
  virtual std::vector<int64_t> select(const PruningSignals& signals, const ImageSpan& span,
                                      const std::vector<int64_t>& text_after) const = 0;
};

// FastV: softmax of the last prompt token's attention row over ALL keys, mean over heads; the
// span's `budget` most attended tokens (first index on ties).
std::vector<int64_t> fastv_select(const torch::Tensor& attention_logits, const ImageSpan& span);

struct DartParams {
  int64_t image_pivots = 4;
  int64_t text_pivots = 4;
  // false (official): each pivot claims floor(B / (image_pivots + text_pivots)) tokens, so
  // image_pivots + 8 * floor(B / 8) are kept (128 -> 132). true: exactly B (the B - image_pivots
  // picks spread over the pivots, earlier pivots one more), our adaptation.
  bool exact_budget = false;
};

// DART: pivots = the `image_pivots` image tokens and `text_pivots` later text tokens with the
// largest key L1 norm; each pivot in ascending position order claims its share of the remaining
// image tokens least cosine-similar to it (normed hidden states, first index on ties); keeps the
// image pivots and all picks.
std::vector<int64_t> dart_select(const torch::Tensor& keys, const torch::Tensor& normed_hidden, const ImageSpan& span,
                                 const std::vector<int64_t>& text_after, const DartParams& params);

// Whether `method` prunes inside the decoder ("fastv", "dart"). Its pre-LLM stage is "full".
bool is_in_decoder_method(const std::string& method);

// The pruner for an in-decoder method; throws era::Error(kInvalidArgument) naming the option if
// its layer K is not in [1, num_layers - 1] or a DART pivot count is negative.
std::unique_ptr<InDecoderPruner> make_in_decoder_pruner(const std::string& method, const BaselineOptions& options,
                                                        int64_t num_layers);

// A pruner and the image spans of one prompt sequence.
struct InDecoderPruning {
  const InDecoderPruner* pruner = nullptr;
  std::vector<ImageSpan> spans;
};

struct PrunedPrefill {
  torch::Tensor logits;                          // [1, 1, V] float32, last prompt position
  std::vector<int64_t> kept_positions;           // the L' positions layers >= K hold, ascending
  std::vector<std::vector<int64_t>> kept_in_span;  // per span: kept offsets inside it, ascending
  int64_t visual_tokens = 0;                     // image tokens layers >= K see
};

// Prefill of `sequence` (batch 1) into an empty `cache`: layers [0, K) on everything, the
// selection, layers [K, N) on the kept positions (original RoPE positions and LAR biases).
PrunedPrefill prefill_pruned(Decoder& decoder, const PromptSequence& sequence, const InDecoderPruning& pruning,
                             KvCache& cache, const LarSettings& lar = {});

// One decode step on a cache prefill_pruned filled: `embeds` [1, 1, D] at RoPE `position`
// (original length + t) through layers [0, K) and then [K, N). Returns float32 logits [1, 1, V].
torch::Tensor decode_pruned(Decoder& decoder, const torch::Tensor& embeds, int64_t position, int64_t layer,
                            KvCache& cache, const LarSettings& lar = {});

}  // namespace era
