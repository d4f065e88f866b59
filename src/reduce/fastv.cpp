#include "reduce/fastv.h"

#include <algorithm>

#include "reduce/budget.h"

namespace era {
namespace {

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

}  // namespace

std::vector<int64_t> fastv_select(const torch::Tensor& attention_logits, const ImageSpan& span) {
  if (keeps_all(span.budget, span.length)) return whole_span(span);
  // The softmax normalises over every key (system, image, text), as the official code's
  // attention probabilities do; then the head mean of the image columns.
  const auto probs = torch::softmax(attention_logits.to(torch::kFloat), -1).mean(0);
  const auto scores = to_host_floats(probs.slice(0, span.start, span.start + span.length));
  std::vector<int64_t> keep = top_indices(scores, span.budget, /*descending=*/true);
  for (auto& i : keep) i += span.start;
  std::sort(keep.begin(), keep.end());
  return keep;
}

std::unique_ptr<InDecoderPruner> make_fastv_pruner(const BaselineOptions& options, int64_t num_layers) {
  check_pruning_layer("fastv_layer", options.fastv_layer, num_layers);
  return std::make_unique<FastVPruner>(options.fastv_layer);
}

}  // namespace era
