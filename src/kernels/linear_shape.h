#pragma once
// Internal header. The rows and the result shape of a linear over x [..., K] with N outputs: what
// every era linear operator (model/cpu_gemv.h, model/cpu_widened_linear.h, model/int8_linear.h)
// computes over 2-D views and hands back in x's leading dimensions.
#include <torch/script.h>

#include <cstdint>
#include <vector>

namespace era {

// The rows of x: the product of its leading dimensions (counted, not x.numel() / K: K may be 0).
inline int64_t linear_rows(const torch::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

// x's shape with the last dimension N.
inline std::vector<int64_t> linear_output_shape(const torch::Tensor& x, int64_t N) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = N;
  return shape;
}

}  // namespace era
