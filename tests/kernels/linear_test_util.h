#pragma once
// Shared by the tests of era's CPU linears (model/cpu_gemv.h, model/cpu_widened_linear.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace era::test {

// |got - want_f32| within float32 summation-order error (`float32_rel` of |want|) plus one
// rounding to got's dtype where that is bf16 / fp16, and 1e-3 absolute for sums near zero.
inline void expect_close_to_float32(const torch::Tensor& got, const torch::Tensor& want_f32, const std::string& what,
                                    double float32_rel = 1e-6) {
  const double ulp = got.scalar_type() == torch::kBFloat16 ? 1.0 / 128
                     : got.scalar_type() == torch::kHalf   ? 1.0 / 1024
                                                           : float32_rel;
  const torch::Tensor diff = (got.to(torch::kFloat) - want_f32).abs();
  const torch::Tensor bound = want_f32.abs() * ulp + 1e-3;
  EXPECT_TRUE(diff.le(bound).all().item<bool>()) << what << ": max error " << diff.max().item<double>();
}

}  // namespace era::test
