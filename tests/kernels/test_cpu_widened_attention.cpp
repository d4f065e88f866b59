// The widened CPU attention (model/cpu_widened_attention.h): the per-head kernel gives the
// TorchScript cores' composition (widened_attention_reference) to float32 summation order, for
// the vision tower's shape (no mask), the decoder's prefill (causal) and a later chunk (causal
// with an offset), keys wider than the values (LAR's augmented width), strided heads, several
// query blocks, each instruction set's path on one thread and on two; the operator the exported
// math cores call, and their switch to it.
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_attention.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "test_support.h"
#include "util/kernel_threads.h"

namespace era {
namespace {

using torch::indexing::Slice;  // NOLINT

// The kernel and the reference sum in a different order (per-head GEMMs against batched ones,
// era's exponential against LibTorch's), so an intermediate bf16 rounding may land one unit
// apart; the output then moves by a fraction of a bf16 unit of the largest value. Wrong masks,
// scales or head layouts move it by whole units.
void expect_attention_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  const torch::Tensor diff = (got.to(torch::kFloat) - want.to(torch::kFloat)).abs();
  const double scale = want.to(torch::kFloat).abs().max().item<double>();
  EXPECT_LE(diff.max().item<double>(), scale / 32) << what;
  // most outputs are the very same bf16 value
  const double same = got.eq(want).to(torch::kFloat).mean().item<double>();
  EXPECT_GE(same, 0.9) << what << ": only " << same << " of the outputs equal";
}

// q/k/v as the models make them: [B, T, H, d] activations viewed as [B, H, T, d] (heads strided).
std::vector<torch::Tensor> heads(int64_t B, int64_t H, int64_t tq, int64_t tk, int64_t d, int64_t dv) {
  const auto bf16 = torch::dtype(torch::kBFloat16);
  return {torch::randn({B, tq, H, d}).to(bf16).transpose(1, 2), torch::randn({B, tk, H, d}).to(bf16).transpose(1, 2),
          torch::randn({B, tk, H, dv}).to(bf16).transpose(1, 2)};
}

// Each path this CPU has (AVX512-BF16, AVX-512, AVX2, scalar), on one kernel thread and on two.
class CpuWidenedAttentionPaths : public ::testing::TestWithParam<std::tuple<AttentionIsa, int>> {
 protected:
  void SetUp() override {
    const auto [isa, threads] = GetParam();
    if (!attention_isa_available(isa)) GTEST_SKIP() << "this CPU lacks the instruction set";
    pin_attention_isa(isa);
    set_kernel_threads(threads);
  }
  void TearDown() override {
    pin_attention_isa(std::nullopt);
    set_kernel_threads(0);
  }
};

TEST_P(CpuWidenedAttentionPaths, EqualsTheCompositionForTowerPrefillAndChunkShapes) {
  torch::manual_seed(0);
  struct Case {
    std::string what;
    int64_t B, H, tq, tk, d, dv, offset;
    bool causal;
  };
  const std::vector<Case> cases = {
      {"vision tower (CLS + 24 x 24, no mask)", 1, 4, 577, 577, 64, 64, 0, false},
      {"decoder prefill (causal)", 1, 3, 45, 45, 32, 32, 0, true},
      {"a later chunk (causal, offset 30)", 2, 2, 19, 49, 32, 32, 30, true},
      {"LAR's augmented keys (width 40 beside values of 40)", 1, 2, 21, 21, 40, 40, 0, true},
      {"values narrower than the keys", 1, 2, 16, 20, 24, 8, 4, true},
      {"odd sizes (vector tails)", 1, 1, 7, 13, 5, 3, 0, false},
      // one query row: the decode step's path (attend_one_query, keys read in place)
      {"a decode step (LAR's 129-wide keys padded to 136)", 1, 4, 1, 250, 136, 136, 249, false},
      {"a decode step, odd widths, fewer keys than one group of four", 2, 3, 1, 3, 13, 7, 2, false},
      {"one query with hidden keys (causal, offset 5 of 11)", 1, 2, 1, 11, 16, 16, 5, true},
  };
  for (const Case& c : cases) {
    const auto t = heads(c.B, c.H, c.tq, c.tk, c.d, c.dv);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    const torch::Tensor got = widened_attention(t[0], t[1], t[2], scale, c.offset, c.causal);
    expect_attention_close(got, widened_attention_reference(t[0], t[1], t[2], scale, c.offset, c.causal), c.what);
    // the layout the callers' transpose(1, 2).reshape reads without a copy
    EXPECT_TRUE(got.transpose(1, 2).is_contiguous()) << c.what;
  }
}

// A decode step's operands as the decoder passes them: slices of the KV cache [B, H, S_max, D]
// (heads S_max * D apart), the query a transposed view.
TEST_P(CpuWidenedAttentionPaths, DecodeStepReadsCacheSlicesInPlace) {
  torch::manual_seed(6);
  const auto bf16 = torch::dtype(torch::kBFloat16);
  const torch::Tensor k_cache = torch::randn({2, 4, 64, 40}).to(bf16), v_cache = torch::randn({2, 4, 64, 40}).to(bf16);
  const torch::Tensor q = torch::randn({2, 1, 4, 40}).to(bf16).transpose(1, 2);
  for (const int64_t tk : {1, 2, 37, 64}) {
    const torch::Tensor k = k_cache.narrow(2, 0, tk), v = v_cache.narrow(2, 0, tk);
    const torch::Tensor got = widened_attention(q, k, v, 0.158, tk - 1, false);
    expect_attention_close(got, widened_attention_reference(q, k, v, 0.158, tk - 1, false),
                           "cache slice of " + std::to_string(tk));
  }
  // one key: the output is that key's value
  const torch::Tensor one = widened_attention(q, k_cache.narrow(2, 0, 1), v_cache.narrow(2, 0, 1), 0.158, 0, false);
  EXPECT_TRUE(torch::equal(one, v_cache.narrow(2, 0, 1)));
}

// Query rows past 2^20 / Tk are a second block: the rows of each block land in their place.
TEST_P(CpuWidenedAttentionPaths, QueryBlocksAreStitchedInOrder) {
  torch::manual_seed(1);
  const auto t = heads(1, 1, 300, 5000, 16, 16);  // 209 rows per block
  const torch::Tensor got = widened_attention(t[0], t[1], t[2], 0.25, 4700, true);
  expect_attention_close(got, widened_attention_reference(t[0], t[1], t[2], 0.25, 4700, true), "two blocks");
}

INSTANTIATE_TEST_SUITE_P(IsaAndThreads, CpuWidenedAttentionPaths,
                         ::testing::Combine(::testing::Values(AttentionIsa::kAvx512Bf16, AttentionIsa::kAvx512,
                                                              AttentionIsa::kAvx2, AttentionIsa::kScalar),
                                            ::testing::Values(1, 2)));

// The causal rule is the cores' (key j hidden from query t where j > offset + t): a value stored
// only in hidden keys must not reach the output, and the first query with offset 0 sees only
// key 0, so its output is exactly v[0].
TEST(CpuWidenedAttention, HiddenKeysContributeNothing) {
  torch::manual_seed(2);
  auto t = heads(1, 2, 6, 6, 8, 8);
  torch::Tensor v = t[2].contiguous();
  const torch::Tensor out = widened_attention(t[0], t[1], v, 0.3, 0, true);
  EXPECT_TRUE(torch::equal(out.index({Slice(), Slice(), 0}), v.index({Slice(), Slice(), 0})));
  torch::Tensor v2 = v.clone();
  v2.narrow(2, 3, 3).fill_(1000.0);  // keys 3.. are hidden from queries 0..2
  const torch::Tensor out2 = widened_attention(t[0], t[1], v2, 0.3, 0, true);
  EXPECT_TRUE(torch::equal(out2.index({Slice(), Slice(), Slice(0, 3)}), out.index({Slice(), Slice(), Slice(0, 3)})));
  EXPECT_FALSE(torch::equal(out2.index({Slice(), Slice(), 5}), out.index({Slice(), Slice(), 5}))) << "not vacuous";
}

// Without the intermediate bf16 roundings (scores, scaled scores, probabilities) the kernel would
// compute plain float32 attention; a float32 reference tells the two apart on many outputs.
TEST(CpuWidenedAttention, RoundsItsScoresAndProbabilitiesAsTheBf16ModelDoes) {
  torch::manual_seed(3);
  const auto t = heads(1, 4, 64, 64, 64, 64);
  const torch::Tensor got = widened_attention(t[0], t[1], t[2], 0.125, 0, false);
  const torch::Tensor plain =
      torch::matmul(torch::softmax(torch::matmul(t[0].to(torch::kFloat), t[1].to(torch::kFloat).transpose(-1, -2)) * 0.125, -1),
                    t[2].to(torch::kFloat))
          .to(torch::kBFloat16);
  const double same_as_plain = got.eq(plain).to(torch::kFloat).mean().item<double>();
  const double same_as_reference =
      got.eq(widened_attention_reference(t[0], t[1], t[2], 0.125, 0, false)).to(torch::kFloat).mean().item<double>();
  EXPECT_GT(same_as_reference, same_as_plain + 0.1) << same_as_reference << " vs " << same_as_plain;
}

TEST(CpuWidenedAttention, OtherDtypesEmptyShapesAndBadShapes) {
  torch::manual_seed(4);
  const torch::Tensor q = torch::randn({1, 2, 5, 8}), k = torch::randn({1, 2, 7, 8}), v = torch::randn({1, 2, 7, 8});
  EXPECT_TRUE(torch::equal(widened_attention(q, k, v, 0.5, 2, true), widened_attention_reference(q, k, v, 0.5, 2, true)))
      << "float32: the composition itself";
  const torch::Tensor qh = q.to(torch::kHalf), kh = k.to(torch::kHalf), vh = v.to(torch::kHalf);
  EXPECT_TRUE(torch::equal(widened_attention(qh, kh, vh, 0.5, 0, false), widened_attention_reference(qh, kh, vh, 0.5, 0, false)));
  const auto bf16 = torch::kBFloat16;
  EXPECT_EQ(widened_attention(q.narrow(2, 0, 0).to(bf16), k.to(bf16), v.to(bf16), 0.5, 0, true).sizes(),
            (std::vector<int64_t>{1, 2, 0, 8}));
  const torch::Tensor none = widened_attention(q.to(bf16), k.narrow(2, 0, 0).to(bf16), v.narrow(2, 0, 0).to(bf16), 0.5, 0, false);
  EXPECT_TRUE(none.eq(0).all().item<bool>()) << "no keys: zeros";
  EXPECT_THROW(widened_attention(q, k.narrow(3, 0, 4), v, 0.5, 0, true), c10::Error);
  EXPECT_THROW(widened_attention(q, k, v.narrow(2, 0, 3), 0.5, 0, true), c10::Error);
  EXPECT_THROW(widened_attention(q[0], k, v, 0.5, 0, true), c10::Error);
}

TEST(CpuWidenedAttention, TheOperatorIsRegisteredAndRunsTheKernel) {
  register_era_operators();
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("era::widened_attention", "");
  EXPECT_EQ(c10::toString(op.schema()),
            "era::widened_attention(Tensor q, Tensor k, Tensor v, float scale, int causal_offset, bool causal) -> Tensor");
  const auto call =
      op.typed<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double, int64_t, bool)>();
  torch::manual_seed(5);
  const auto t = heads(1, 2, 9, 9, 16, 16);
  EXPECT_TRUE(torch::equal(call.call(t[0], t[1], t[2], 0.25, 0, true), widened_attention(t[0], t[1], t[2], 0.25, 0, true)));
}

// The exported cores' switch: with cpu_upcast_min_rows set (Session::open on a CPU without bf16
// arithmetic) the math cores of the tower and the decoder call era::widened_attention. Bundles
// exported with the fused 'sdpa' cores have none (LibTorch's fused kernel serves them).
TEST(CpuWidenedAttention, ExportedMathCoresWidenThroughTheOperator) {
  ModelBundle b = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  apply_cpu_matmul(b, CpuMatmul::kFloat32);
  int math_cores = 0;
  for (const torch::jit::Module* root : {&b.vision, &b.decoder}) {
    for (const torch::jit::NameModule& named : root->named_modules()) {
      const std::string type = named.value.type()->name()->name();
      if (type != "VisionMathCore" && type != "MathAttention") continue;
      ++math_cores;
      EXPECT_NE(named.value.get_method("forward").graph()->toString().find("era::widened_attention"), std::string::npos)
          << named.name;
    }
  }
  if (math_cores == 0) GTEST_SKIP() << "the test bundle was exported with fused attention cores (sdpa)";
  // the tower's first layer, widened, equals the operator on its own q / k / v
  torch::jit::Module attn =
      b.vision.attr("encoder").toModule().attr("layers").toModule().attr("0").toModule().attr("self_attn").toModule();
  torch::jit::Module core = attn.attr("core").toModule();
  torch::manual_seed(6);
  const int64_t heads_n = attn.attr("num_heads").toInt(), d = attn.attr("head_dim").toInt();
  const auto t = heads(1, heads_n, 20, 20, d, d);
  const torch::Tensor got = core.forward({t[0], t[1], t[2], true}).toTensor();
  EXPECT_TRUE(torch::equal(got, widened_attention(t[0], t[1], t[2], core.attr("scale").toDouble(), 0, false)));
}

}  // namespace
}  // namespace era
