// LAR's rectified attention (layers/lar_attention.h) against its formula: the augmented key
// dimension and the additive mask are the same maths as softmax(Q K^T / sqrt(d) + log b + causal) V
// computed here in double precision, on every kernel path this build has, for a whole prefill, a
// chunk after earlier keys and a decode step; plus RoPE's and RMSNorm's defining properties.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "layers/lar_attention.h"
#include "layers/rms_norm.h"
#include "layers/rope.h"
#include "parity_support.h"
#include "util/compat.h"

namespace era::layers {
namespace {

using test::max_rel_error;

torch::Tensor formula(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& log_b,
                      int64_t offset) {
  const auto qd = q.to(torch::kDouble), kd = k.to(torch::kDouble), vd = v.to(torch::kDouble);
  auto s = torch::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  s = s + log_b.to(torch::kDouble).unsqueeze(1).unsqueeze(1);
  s = s.masked_fill(hidden_keys(q.size(2), k.size(2), offset, q.device()), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(s, -1), vd);
}

// Q~ = [Q, 1, 0..], K~ = [K, sqrt(d) log b, 0..], V~ = [V, 0..], `width` wide.
torch::Tensor augmented(const torch::Tensor& x, const torch::Tensor& column, int64_t width) {
  return torch::constant_pad_nd(torch::cat({x, column}, -1), {0, width - x.size(-1) - 1});
}

std::vector<AttentionKernel> kernels() {
  std::vector<AttentionKernel> k{AttentionKernel::kMath};
  if (compat::kHasSdpa) k.push_back(AttentionKernel::kSdpa);
  return k;
}

TEST(LarAttention, BothFormsEqualTheFormulaOnEveryKernel) {
  torch::manual_seed(3);
  const int64_t B = 2, H = 3, d = 16, width = 24;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  struct Shape {
    int64_t tq, tk, offset;
  };
  for (const Shape sh : {Shape{9, 9, 0}, Shape{4, 11, 7}, Shape{1, 13, 12}}) {
    const auto q = torch::randn({B, H, sh.tq, d}), k = torch::randn({B, H, sh.tk, d}), v = torch::randn({B, H, sh.tk, d});
    const auto log_b = torch::log(torch::rand({B, sh.tk}) * 4 + 0.25);
    const auto want = formula(q, k, v, log_b, sh.offset);
    const auto qa = augmented(q, torch::ones({B, H, sh.tq, 1}), width);
    const auto ka = augmented(k, (log_b * std::sqrt(static_cast<double>(d))).view({B, 1, sh.tk, 1}).expand({B, H, sh.tk, 1}), width);
    const auto va = torch::constant_pad_nd(v, {0, width - d});
    for (const AttentionKernel kernel : kernels()) {
      SCOPED_TRACE(std::string(kernel == AttentionKernel::kMath ? "math" : "sdpa") + " tq " + std::to_string(sh.tq) +
                   " tk " + std::to_string(sh.tk));
      const auto out = attend(kernel, {}, qa, ka, va, scale, sh.offset);
      EXPECT_LE(max_rel_error(out.narrow(-1, 0, d), want), 1e-5);
      // the padding of V~ stays zero: nothing leaks into the columns past d
      EXPECT_EQ(out.narrow(-1, d, width - d).abs().max().item<float>(), 0.0f);
      EXPECT_LE(max_rel_error(attend_with_bias(kernel, {}, q, k, v, log_b, scale, sh.offset), want), 1e-5);
    }
  }
}

TEST(LarAttention, PlainKeysAreOrdinaryCausalAttention) {
  torch::manual_seed(4);
  const auto q = torch::randn({1, 2, 6, 8}), k = torch::randn({1, 2, 6, 8}), v = torch::randn({1, 2, 6, 8});
  const auto want = formula(q, k, v, torch::zeros({1, 6}), 0);
  for (const AttentionKernel kernel : kernels())
    EXPECT_LE(max_rel_error(attend(kernel, {}, q, k, v, 1.0 / std::sqrt(8.0), 0), want), 1e-5);
  // query 0 sees key 0 only
  EXPECT_LE(max_rel_error(attend(AttentionKernel::kMath, {}, q, k, v, 1.0 / std::sqrt(8.0), 0).select(2, 0), v.select(2, 0)),
            1e-6);
}

// The runtime's bf16 routes (era's decode kernel, widened prefill) compute the same attention as
// LibTorch's bf16 composition, to bf16's rounding.
TEST(LarAttention, Bfloat16RoutesAgreeWithTheComposition) {
  torch::manual_seed(5);
  const int64_t d = 32;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto q1 = torch::randn({1, 4, 1, 40}).to(torch::kBFloat16), k = torch::randn({1, 4, 30, 40}).to(torch::kBFloat16),
             v = torch::randn({1, 4, 30, 40}).to(torch::kBFloat16), qn = torch::randn({1, 4, 30, 40}).to(torch::kBFloat16);
  AttentionRouting decode;
  decode.decode_kernel = true;
  AttentionRouting widened;
  widened.upcast_min_rows = 2;
  for (const AttentionKernel kernel : kernels()) {
    EXPECT_LE(max_rel_error(attend(kernel, decode, q1, k, v, scale, 29), attend(kernel, {}, q1, k, v, scale, 29)), 2e-2);
    EXPECT_LE(max_rel_error(attend(kernel, widened, qn, k, v, scale, 0), attend(kernel, {}, qn, k, v, scale, 0)), 2e-2);
  }
}

TEST(LarAttention, UnknownOrUnavailableKernelsAreRefusedByName) {
  EXPECT_EQ(parse_attention_kernel("math"), AttentionKernel::kMath);
  try {
    parse_attention_kernel("flash3");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("attention 'flash3' is not one of math, sdpa"), std::string::npos);
  }
  if (!compat::kHasSdpa) {
    EXPECT_THROW(parse_attention_kernel("sdpa"), std::exception);
  }
}

// M-RoPE with three equal axes is 1-D RoPE (Qwen2.5-VL's text tokens), and RoPE is a rotation:
// it keeps every pair's norm and makes q.k depend only on the positions' difference.
TEST(Rope, MultimodalWithEqualAxesIsOneDimensionalAndRotationsKeepNorms) {
  const auto p = torch::arange(0, 12, torch::kLong).unsqueeze(0);
  const auto [c1, s1] = rope_cos_sin(p, 16, 10000.0, torch::kFloat, {});
  const auto [c3, s3] = rope_cos_sin(torch::stack({p, p, p}, -1), 16, 10000.0, torch::kFloat, {2, 3, 3});
  EXPECT_TRUE(torch::allclose(c1, c3, 0, 0));
  EXPECT_TRUE(torch::allclose(s1, s3, 0, 0));
  const auto [c_diff, s_diff] = rope_cos_sin(torch::stack({p, p * 0, p * 0}, -1), 16, 10000.0, torch::kFloat, {2, 3, 3});
  EXPECT_FALSE(torch::allclose(c1, c_diff));  // the height / width sections follow their own axes

  torch::manual_seed(6);
  const auto x = torch::randn({1, 2, 12, 16}, torch::kDouble);
  const auto r = apply_rope(x, c1.to(torch::kDouble), s1.to(torch::kDouble));
  EXPECT_LE(max_rel_error(r.norm(2, -1), x.norm(2, -1)), 1e-6);
  // the same q at position 5 and k at position 2 score as q at 9 and k at 6
  const auto q = torch::randn({1, 1, 1, 16}, torch::kDouble).expand({1, 1, 12, 16}).contiguous();
  const auto k = torch::randn({1, 1, 1, 16}, torch::kDouble).expand({1, 1, 12, 16}).contiguous();
  const auto qr = apply_rope(q, c1.to(torch::kDouble), s1.to(torch::kDouble)), kr = apply_rope(k, c1.to(torch::kDouble), s1.to(torch::kDouble));
  const double a = (qr[0][0][5] * kr[0][0][2]).sum().item<double>(), b = (qr[0][0][9] * kr[0][0][6]).sum().item<double>();
  EXPECT_NEAR(a, b, 1e-5);
}

TEST(RmsNorm, OutputHasUnitRootMeanSquareTimesTheWeight) {
  torch::manual_seed(8);
  const auto x = torch::randn({3, 5, 64}) * 7;
  const auto y = rms_norm(x, torch::ones({64}), 1e-6);
  EXPECT_LE(max_rel_error(y.pow(2).mean(-1), torch::ones({3, 5})), 1e-5);
  const auto w = torch::rand({64}) + 0.5;
  EXPECT_LE(max_rel_error(rms_norm(x, w, 1e-6), y * w), 1e-6);
}

}  // namespace
}  // namespace era::layers
