#pragma once
// Shared by the tests that compare era's tensors with the Python references' files.
#include <torch/script.h>

#include "test_support.h"

namespace era::test {

// max |got - want| / max |want|, in double precision.
inline double max_rel_error(const torch::Tensor& got, const torch::Tensor& want) {
  const auto g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  return ((g - w).abs().max() / w.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace era::test
