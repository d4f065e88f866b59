// bf16 <-> float32 rows (model/cpu_convert.h): bit for bit LibTorch's conversions (exact
// widening, rounding to nearest even), the special values included, rows a stride apart, the
// vector loop's tails, and the transposed widening.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu_convert.h"

namespace era {
namespace {

// Every bf16 bit pattern but the NaNs (whose payloads LibTorch's vector and scalar paths round
// differently).
torch::Tensor all_finite_and_infinite_bf16() {
  const torch::Tensor bits = torch::arange(0, 1 << 16, torch::kInt).to(torch::kShort);
  const torch::Tensor values = bits.view(torch::kBFloat16);
  return values.masked_select(values.to(torch::kFloat).isnan().logical_not());
}

// float32 values exactly halfway between two bf16 values (half of them next to an odd one, half
// next to an even one: rounding to nearest even picks differently), their neighbours, specials.
torch::Tensor ties_and_specials() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          -1e-40f,
                          3.0e38f};
  for (uint32_t high = 0x3F80; high < 0x3F80 + 64; ++high) {
    const uint32_t tie = (high << 16) | 0x8000u;
    for (const uint32_t u : {tie, tie + 1, tie - 1}) {
      float f;
      std::memcpy(&f, &u, sizeof f);
      v.push_back(f);
      v.push_back(-f);
    }
  }
  return torch::tensor(v);
}

torch::Tensor widened(const torch::Tensor& src) {  // [rows, cols] bf16, rows contiguous
  torch::Tensor dst = torch::empty(src.sizes(), torch::kFloat);
  widen_bf16_rows(src.data_ptr<c10::BFloat16>(), src.stride(0), dst.data_ptr<float>(), src.size(1), src.size(0), src.size(1));
  return dst;
}

torch::Tensor rounded(const torch::Tensor& src) {  // [rows, cols] float32, rows contiguous
  torch::Tensor dst = torch::empty(src.sizes(), torch::kBFloat16);
  round_rows_to_bf16(src.data_ptr<float>(), src.stride(0), dst.data_ptr<c10::BFloat16>(), src.size(1), src.size(0), src.size(1));
  return dst;
}

TEST(CpuConvert, WideningIsExactForEveryValue) {
  const torch::Tensor all = all_finite_and_infinite_bf16();
  EXPECT_TRUE(torch::equal(widened(all.view({1, -1})), all.to(torch::kFloat).view({1, -1})));
  // rows a stride apart (a head of a [T, H, d] activation), 37 wide: the vector loop's tail
  torch::manual_seed(0);
  const torch::Tensor head = torch::randn({300, 5, 37}).to(torch::kBFloat16).select(1, 2);
  ASSERT_FALSE(head.is_contiguous());
  EXPECT_TRUE(torch::equal(widened(head), head.to(torch::kFloat)));
}

TEST(CpuConvert, RoundingIsLibTorchsNearestEvenTiesAndSpecialsIncluded) {
  const torch::Tensor special = ties_and_specials().view({1, -1});
  EXPECT_TRUE(torch::equal(rounded(special), special.to(torch::kBFloat16)));
  torch::manual_seed(1);
  const torch::Tensor big = torch::randn({100, 333}) * 1000;  // rows not a multiple of 16
  EXPECT_TRUE(torch::equal(rounded(big), big.to(torch::kBFloat16)));
  const torch::Tensor strided = torch::randn({40, 3, 21}).select(1, 1);
  EXPECT_TRUE(torch::equal(rounded(strided), strided.to(torch::kBFloat16)));
  const torch::Tensor nan = torch::full({1, 20}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(rounded(nan).to(torch::kFloat).isnan().all().item<bool>()) << "a NaN stays a NaN";
}

TEST(CpuConvert, TransposedWideningPutsEachValueInItsColumn) {
  torch::manual_seed(2);
  const torch::Tensor src = torch::randn({19, 4, 7}).to(torch::kBFloat16).select(1, 3);  // [19, 7], rows 28 apart
  torch::Tensor dst = torch::full({7, 24}, -1.0f);                                       // rows 24 apart, 5 spare columns
  widen_bf16_rows_transposed(src.data_ptr<c10::BFloat16>(), src.stride(0), dst.data_ptr<float>(), 24, 19, 7);
  EXPECT_TRUE(torch::equal(dst.narrow(1, 0, 19), src.to(torch::kFloat).t()));
  EXPECT_TRUE(dst.narrow(1, 19, 5).eq(-1).all().item<bool>()) << "nothing written past the rows";
}

}  // namespace
}  // namespace era
