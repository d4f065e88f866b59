#pragma once
// The selection half of in-decoder visual-token pruning (FastV, DART): which image tokens decoder
// layers >= K keep, chosen from what layer K-1 computed. The running half (layers [0, K) on the
// whole prompt, then [K, N) on the kept tokens over a split KV cache) is runtime/in_decoder_pruning.h.
//
// Only image tokens are dropped; text is always kept. The budget applies per image span (a prompt
// with two images prunes each image's span to its own budget). On LLaVA-NeXT an image's span is
// the whole packed sequence (base + unpadded grid + newline tokens) and the budget is the total
// kept for it (the official "global" extension).
#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

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

// Throws era::Error(kInvalidArgument) naming the option `key` unless 1 <= layer <= num_layers - 1.
void check_pruning_layer(const std::string& key, int64_t layer, int64_t num_layers);

// ---- shared by the selections ---------------------------------------------------------------
// Every position of the span, in order: the selection when the budget keeps everything.
std::vector<int64_t> whole_span(const ImageSpan& span);
// Indices of the `k` largest (descending) or smallest values, first index on ties.
std::vector<int64_t> top_indices(const std::vector<float>& values, int64_t k, bool descending);
// A tensor's values as float32 on the host.
std::vector<float> to_host_floats(const torch::Tensor& t);

}  // namespace era
