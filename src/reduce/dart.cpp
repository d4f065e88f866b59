#include "reduce/dart.h"

#include <algorithm>

#include "era/error.h"
#include "reduce/budget.h"

namespace era {
namespace {

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

}  // namespace

std::vector<int64_t> dart_select(const torch::Tensor& keys, const torch::Tensor& normed_hidden, const ImageSpan& span,
                                 const std::vector<int64_t>& text_after, const DartParams& params) {
  if (keeps_all(span.budget, span.length)) return whole_span(span);
  const auto l1 = to_host_floats(keys.to(torch::kFloat).abs().sum(-1));  // [L]
  const int64_t budget = span.budget;

  // Pivots: largest key L1 norm among the image tokens and among the text after the image.
  std::vector<float> image_norms(l1.begin() + span.start, l1.begin() + span.start + span.length);
  const int64_t n_image_pivots = params.exact_budget ? std::min(params.image_pivots, budget) : params.image_pivots;
  std::vector<int64_t> image_pivots = top_indices(image_norms, n_image_pivots, true);
  for (auto& i : image_pivots) i += span.start;
  std::vector<float> text_norms;
  for (const int64_t p : text_after) text_norms.push_back(l1[static_cast<size_t>(p)]);
  std::vector<int64_t> text_pivots;
  for (const int64_t i : top_indices(text_norms, params.text_pivots, true))
    text_pivots.push_back(text_after[static_cast<size_t>(i)]);

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
  const auto sims =
      to_host_floats(torch::matmul(h.index_select(0, pivot_index), h.slice(0, span.start, span.start + span.length).t()));

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

std::unique_ptr<InDecoderPruner> make_dart_pruner(const BaselineOptions& options, int64_t num_layers) {
  check_pruning_layer("dart_layer", options.dart_layer, num_layers);
  if (options.dart_image_pivots < 0 || options.dart_text_pivots < 0) {
    throw Error(ErrorCode::kInvalidArgument, "method options dart_image_pivots and dart_text_pivots must be >= 0");
  }
  DartParams p;
  p.image_pivots = options.dart_image_pivots;
  p.text_pivots = options.dart_text_pivots;
  p.exact_budget = options.dart_exact_budget;
  return std::make_unique<DartPruner>(options.dart_layer, p);
}

}  // namespace era
