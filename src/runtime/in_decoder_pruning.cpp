#include "runtime/in_decoder_pruning.h"

#include <algorithm>
#include <numeric>

#include "era/error.h"

namespace era {
namespace {

// Layer `layer`'s post-RoPE keys of slots 0..L-1 as the cache holds them (the LAR bias column
// dropped), GQA kv heads repeated so every query head has its block, heads concatenated: [L, H*d].
torch::Tensor layer_keys(const TextSpec& spec, const KvCache& cache, int64_t layer, int64_t L) {
  auto k = cache.keys()[layer][0].narrow(1, 0, L).narrow(-1, 0, spec.head_dim);  // [Hkv, L, d]
  const int64_t n_rep = spec.num_heads / std::max<int64_t>(spec.num_kv_heads, 1);
  if (n_rep > 1) k = k.repeat_interleave(n_rep, 0);
  return k.permute({1, 0, 2}).reshape({L, -1});
}

}  // namespace

PrunedPrefill prefill_pruned(Decoder& decoder, const PromptSequence& sequence, const InDecoderPruning& pruning, KvCache& cache,
                             const LarSettings& lar) {
  if (pruning.pruner == nullptr) throw Error(ErrorCode::kInvalidArgument, "prefill_pruned: no pruner");
  const InDecoderPruner& pruner = *pruning.pruner;
  decoder.require_layer_ranges(pruner.name());
  const int64_t K = pruner.layer(), N = decoder.num_layers(), L = sequence.length();
  if (K < 1 || K >= N) throw Error(ErrorCode::kInvalidArgument, pruner.name() + ": pruning layer out of range");
  if (sequence.embeds.size(0) != 1) throw Error(ErrorCode::kInvalidArgument, "in-decoder pruning runs one sequence at a time");
  if (cache.length() != 0) throw Error(ErrorCode::kInvalidArgument, "in-decoder pruning prefills an empty KV cache");

  // Layers 0..K-1 on the whole prompt.
  auto [hidden, attention] =
      decoder.run_range(sequence.embeds, sequence.positions, sequence.key_log_bias, cache, 0, K, pruner.needs_attention(), lar);

  PruningSignals signals;
  if (pruner.needs_attention()) signals.attention = attention[K - 1][0];  // [H, L]
  if (pruner.needs_keys_and_hidden()) {
    signals.keys = layer_keys(decoder.text_spec(), cache, K - 1, L);
    signals.normed_hidden = decoder.final_norm(hidden)[0];  // [L, D]
  }

  // Positions inside image spans, to keep text (and other images) apart.
  std::vector<bool> is_image(static_cast<size_t>(L), false);
  for (const auto& s : pruning.spans) {
    if (s.start < 0 || s.length < 0 || s.start + s.length > L)
      throw Error(ErrorCode::kInvalidArgument, "image span outside the sequence");
    for (int64_t p = s.start; p < s.start + s.length; ++p) is_image[static_cast<size_t>(p)] = true;
  }

  PrunedPrefill out;
  std::vector<bool> keep(static_cast<size_t>(L), true);
  for (const auto& s : pruning.spans) {
    std::vector<int64_t> text_after;
    for (int64_t p = s.start + s.length; p < L; ++p) {
      if (!is_image[static_cast<size_t>(p)]) text_after.push_back(p);
    }
    const auto kept = pruner.select(signals, s, text_after);
    for (int64_t p = s.start; p < s.start + s.length; ++p) keep[static_cast<size_t>(p)] = false;
    std::vector<int64_t> offsets;
    for (const int64_t p : kept) {
      keep[static_cast<size_t>(p)] = true;
      offsets.push_back(p - s.start);
    }
    out.visual_tokens += static_cast<int64_t>(kept.size());
    out.kept_in_span.push_back(std::move(offsets));
  }
  for (int64_t p = 0; p < L; ++p) {
    if (keep[static_cast<size_t>(p)]) out.kept_positions.push_back(p);
  }

  // Layers K..N-1 on the kept tokens, at their original positions, into slots 0..L'-1.
  const auto index = torch::tensor(out.kept_positions, torch::kLong).to(hidden.device());
  const auto kept_hidden = hidden.index_select(1, index);
  const auto kept_positions = sequence.positions.to(hidden.device()).index_select(1, index);
  const auto kept_bias = sequence.key_log_bias.to(hidden.device()).index_select(1, index);
  const auto top = decoder.run_range(kept_hidden, kept_positions, kept_bias, cache, K, N, false, lar).first;
  out.logits = decoder.logits(top, /*last_only=*/true);
  return out;
}

torch::Tensor decode_pruned(Decoder& decoder, const torch::Tensor& embeds, int64_t position, int64_t layer, KvCache& cache,
                            const LarSettings& lar) {
  const auto positions = torch::full({1, 1}, position, torch::kLong);
  const auto bias = torch::zeros({1, 1}, torch::kFloat);
  const auto low = decoder.run_range(embeds, positions, bias, cache, 0, layer, false, lar).first;
  const auto high = decoder.run_range(low, positions, bias, cache, layer, decoder.num_layers(), false, lar).first;
  return decoder.logits(high, /*last_only=*/true);
}

}  // namespace era
