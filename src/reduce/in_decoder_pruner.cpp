#include "reduce/in_decoder_pruner.h"

#include <algorithm>
#include <numeric>

#include "era/error.h"

namespace era {

void check_pruning_layer(const std::string& key, int64_t layer, int64_t num_layers) {
  if (layer >= 1 && layer <= num_layers - 1) return;
  throw Error(ErrorCode::kInvalidArgument, "method option " + key + " = " + std::to_string(layer) + " must be in [1, " +
                                               std::to_string(num_layers - 1) + "] for this " + std::to_string(num_layers) +
                                               "-layer decoder (layers 0..K-1 see every "
                                               "visual token, layers K.. the kept ones)");
}

std::vector<int64_t> whole_span(const ImageSpan& span) {
  std::vector<int64_t> all(static_cast<size_t>(span.length));
  std::iota(all.begin(), all.end(), span.start);
  return all;
}

std::vector<int64_t> top_indices(const std::vector<float>& v, int64_t k, bool descending) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return descending ? v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)]
                      : v[static_cast<size_t>(a)] < v[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(std::min<int64_t>(std::max<int64_t>(k, 0), static_cast<int64_t>(v.size()))));
  return order;
}

std::vector<float> to_host_floats(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace era
