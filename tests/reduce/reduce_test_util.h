#pragma once
// Shared by the reduction tests: random inputs shaped like one image's tokens, and small helpers.
#include <torch/script.h>

#include <vector>

#include "reduce/reducer.h"

namespace era::test {

// N tokens of width D (features of width D/2 + 1), H-head maps; logits spread like real CLS logits.
inline ReductionInput random_reduction_input(int64_t n, int64_t d, int64_t h, int64_t budget, uint64_t seed) {
  torch::manual_seed(seed);
  ReductionInput in;
  in.embeddings = torch::randn({n, d});
  in.features = torch::randn({n, d / 2 + 1});
  in.cls_logits = torch::randn({h, n}) * 3;
  in.cls_probs = torch::softmax(in.cls_logits, 1);
  in.mean_logits = torch::randn({h, n}) * 3;
  in.mean_probs = torch::softmax(in.mean_logits, 1);
  in.budget = budget;
  return in;
}

inline std::vector<float> floats(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace era::test
