#include "runtime/in_decoder_pruning.h"

#include <algorithm>
#include <numeric>

#include "era/error.h"

namespace era {
namespace {

std::vector<float> to_host(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Indices of the `k` largest (descending = true) or smallest values, first index on ties.
std::vector<int64_t> top_indices(const std::vector<float>& v, int64_t k, bool descending) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return descending ? v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)] : v[static_cast<size_t>(a)] < v[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(k, 0), static_cast<int64_t>(v.size()))));
  return order;
}

bool keeps_all(const ImageSpan& span) { return span.budget <= 0 || span.budget >= span.length; }

std::vector<int64_t> whole_span(const ImageSpan& span) {
  std::vector<int64_t> all(static_cast<size_t>(span.length));
  std::iota(all.begin(), all.end(), span.start);
  return all;
}

class FastVPruner final : public InDecoderPruner {
 public:
  explicit FastVPruner(int64_t layer) : layer_(layer) {}
  std::string name() const override { return "fastv"; }
  int64_t layer() const override { return layer_; }
  bool needs_attention() const override { return true; }
  bool needs_keys_and_hidden() const override { return false; }
  std::vector<int64_t> select(const PruningSignals& s, const ImageSpan& span, const std::vector<int64_t>&) const override {
    return fastv_select(s.attention, span);
  }

 private:
  int64_t layer_;
};

class DartPruner final : public InDecoderPruner {
 public:
  DartPruner(int64_t layer, DartParams params) : layer_(layer), params_(params) {}
  std::string name() const override { return "dart"; }
  int64_t layer() const override { return layer_; }
  bool needs_attention() const override { return false; }
  bool needs_keys_and_hidden() const override { return true; }
  std::vector<int64_t> select(const PruningSignals& s, const ImageSpan& span,
                              const std::vector<int64_t>& text_after) const override {
    return dart_select(s.keys, s.normed_hidden, span, text_after, params_);
  }

 private:
  int64_t layer_;
  DartParams params_;
};

// Layer `layer`'s post-RoPE keys of slots 0..L-1 as the cache holds them (the LAR bias column
// dropped), GQA kv heads repeated so every query head has its block, heads concatenated: [L, H*d].
torch::Tensor layer_keys(const TextSpec& spec, const KvCache& cache, int64_t layer, int64_t L) {
  auto k = cache.keys()[layer][0].narrow(1, 0, L).narrow(-1, 0, spec.head_dim);  // [Hkv, L, d]
  const int64_t n_rep = spec.num_heads / std::max<int64_t>(spec.num_kv_heads, 1);
  if (n_rep > 1) k = k.repeat_interleave(n_rep, 0);
  return k.permute({1, 0, 2}).reshape({L, -1});
}

void check_layer(const std::string& key, int64_t layer, int64_t num_layers) {
  if (layer >= 1 && layer <= num_layers - 1) return;
  throw Error(ErrorCode::kInvalidArgument, "method option " + key + " = " + std::to_string(layer) +
                                               " must be in [1, " + std::to_string(num_layers - 1) + "] for this " +
                                               std::to_string(num_layers) + "-layer decoder (layers 0..K-1 see every "
                                               "visual token, layers K.. the kept ones)");
}

}  // namespace

std::vector<int64_t> fastv_select(const torch::Tensor& attention_logits, const ImageSpan& span) {
  if (keeps_all(span)) return whole_span(span);
  // The softmax normalises over every key (system, image, text), as the official code's
  // attention probabilities do; then the head mean of the image columns.
  const auto probs = torch::softmax(attention_logits.to(torch::kFloat), -1).mean(0);
  const auto scores = to_host(probs.slice(0, span.start, span.start + span.length));
  std::vector<int64_t> keep = top_indices(scores, span.budget, /*descending=*/true);
  for (auto& i : keep) i += span.start;
  std::sort(keep.begin(), keep.end());
  return keep;
}

std::vector<int64_t> dart_select(const torch::Tensor& keys, const torch::Tensor& normed_hidden, const ImageSpan& span,
                                 const std::vector<int64_t>& text_after, const DartParams& params) {
  if (keeps_all(span)) return whole_span(span);
  const auto l1 = to_host(keys.to(torch::kFloat).abs().sum(-1));  // [L]
  const int64_t budget = span.budget;

  // Pivots: largest key L1 norm among the image tokens and among the text after the image.
  std::vector<float> image_norms(l1.begin() + span.start, l1.begin() + span.start + span.length);
  const int64_t n_image_pivots = params.exact_budget ? std::min(params.image_pivots, budget) : params.image_pivots;
  std::vector<int64_t> image_pivots = top_indices(image_norms, n_image_pivots, true);
  for (auto& i : image_pivots) i += span.start;
  std::vector<float> text_norms;
  for (const int64_t p : text_after) text_norms.push_back(l1[static_cast<size_t>(p)]);
  std::vector<int64_t> text_pivots;
  for (const int64_t i : top_indices(text_norms, params.text_pivots, true)) text_pivots.push_back(text_after[static_cast<size_t>(i)]);

  // Ascending position order (a deterministic stand-in for the official Python set order).
  std::vector<int64_t> pivots = image_pivots;
  pivots.insert(pivots.end(), text_pivots.begin(), text_pivots.end());
  std::sort(pivots.begin(), pivots.end());

  // Each pivot's share of the picks.
  std::vector<int64_t> share(pivots.size(), 0);
  if (!pivots.empty()) {
    if (params.exact_budget) {
      const int64_t picks = std::max<int64_t>(0, budget - static_cast<int64_t>(image_pivots.size()));
      const int64_t n = static_cast<int64_t>(pivots.size());
      for (int64_t i = 0; i < n; ++i) share[static_cast<size_t>(i)] = picks / n + (i < picks % n ? 1 : 0);
    } else {
      const int64_t nominal = params.image_pivots + params.text_pivots;
      std::fill(share.begin(), share.end(), nominal > 0 ? budget / nominal : 0);
    }
  }

  // Cosine similarity of each pivot to every image token, in the final-norm space.
  const auto hf = normed_hidden.to(torch::kFloat);
  const auto h = hf / hf.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-8);
  const auto pivot_index = torch::tensor(pivots, torch::kLong).to(h.device());
  const auto sims = to_host(torch::matmul(h.index_select(0, pivot_index), h.slice(0, span.start, span.start + span.length).t()));

  std::vector<bool> in_pool(static_cast<size_t>(span.length), true);
  for (const int64_t p : image_pivots) in_pool[static_cast<size_t>(p - span.start)] = false;
  std::vector<int64_t> keep = image_pivots;
  for (size_t k = 0; k < pivots.size(); ++k) {
    std::vector<int64_t> pool;
    std::vector<float> sim;
    for (int64_t j = 0; j < span.length; ++j) {
      if (!in_pool[static_cast<size_t>(j)]) continue;
      pool.push_back(j);
      sim.push_back(sims[k * static_cast<size_t>(span.length) + static_cast<size_t>(j)]);
    }
    for (const int64_t i : top_indices(sim, share[k], /*descending=*/false)) {  // least similar first
      const int64_t j = pool[static_cast<size_t>(i)];
      in_pool[static_cast<size_t>(j)] = false;
      keep.push_back(span.start + j);
    }
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

bool is_in_decoder_method(const std::string& method) { return method == "fastv" || method == "dart"; }

std::unique_ptr<InDecoderPruner> make_in_decoder_pruner(const std::string& method, const BaselineOptions& options,
                                                        int64_t num_layers) {
  if (method == "fastv") {
    check_layer("fastv_layer", options.fastv_layer, num_layers);
    return std::make_unique<FastVPruner>(options.fastv_layer);
  }
  if (method == "dart") {
    check_layer("dart_layer", options.dart_layer, num_layers);
    if (options.dart_image_pivots < 0 || options.dart_text_pivots < 0) {
      throw Error(ErrorCode::kInvalidArgument, "method options dart_image_pivots and dart_text_pivots must be >= 0");
    }
    DartParams p;
    p.image_pivots = options.dart_image_pivots;
    p.text_pivots = options.dart_text_pivots;
    p.exact_budget = options.dart_exact_budget;
    return std::make_unique<DartPruner>(options.dart_layer, p);
  }
  throw Error(ErrorCode::kInvalidArgument, "'" + method + "' is not an in-decoder pruning method (fastv, dart)");
}

PrunedPrefill prefill_pruned(Decoder& decoder, const PromptSequence& sequence, const InDecoderPruning& pruning,
                             KvCache& cache, const LarSettings& lar) {
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
    if (s.start < 0 || s.length < 0 || s.start + s.length > L) throw Error(ErrorCode::kInvalidArgument, "image span outside the sequence");
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
