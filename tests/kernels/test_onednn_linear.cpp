// The vision tower's and projector's linears packed for oneDNN, or split by rows where LibTorch
// cannot pack (model/onednn_linear.h): where the operators exist, the packed product against
// float64 and LibTorch's own bf16 linear; the row blocks' product against the same; which modules
// a session routes under which mode; and a routed session's prompt logits against the plain bf16
// run and the float32 model.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <iostream>

#include "bundle_session.h"
#include "era/era.h"
#include "kernels/onednn_linear.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "pipeline/session_internals.h"
#include "test_support.h"
#include "util/compat.h"

namespace era {
namespace {

struct Packing {
  int linears = 0, routed = 0;    // exported Linears (modules with `onednn_packed`); those routed to era::onednn_linear
  int packed = 0;                 // routed Linears holding a packed weight
  int attentions = 0, fused = 0;  // attention modules with `qkv_fused`; those fused
  int emptied = 0;                // Linears whose weight was emptied (a fused k_proj / v_proj)
};

Packing packing_of(const torch::jit::Module& top) {
  Packing p;
  for (const torch::jit::Module m : top.modules()) {
    if (m.hasattr("qkv_fused")) {
      ++p.attentions;
      p.fused += m.attr("qkv_fused").toBool();
    }
    if (!m.hasattr("onednn_packed")) continue;
    ++p.linears;
    const torch::Tensor w = m.attr("weight").toTensor();
    const bool flag = m.attr("onednn_packed").toBool();
    EXPECT_TRUE(flag || !w.is_mkldnn()) << "a packed weight the exported Linear would not route";
    p.routed += flag;
    p.packed += w.is_mkldnn();
    p.emptied += !w.is_mkldnn() && w.numel() == 0;
  }
  return p;
}

}  // namespace

TEST(OnednnLinear, OperatorsExistExactlyOnLibTorch2) { EXPECT_EQ(onednn_packing_available(), compat::kHasOnednnPackedLinear); }

TEST(OnednnLinear, PlainWeightIsLibTorchsLinear) {
  torch::manual_seed(1);
  const auto x = torch::randn({5, 7, 48}).to(torch::kBFloat16), w = torch::randn({40, 48}).to(torch::kBFloat16);
  const auto b = torch::randn({40}).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(onednn_linear(x, w, b), torch::linear(x, w, b)));
  EXPECT_TRUE(torch::equal(onednn_linear(x, w, c10::nullopt), torch::linear(x, w)));
}

// Where oneDNN multiplies bf16 at all (the operators, and AVX512-BF16 or AMX-BF16 instructions):
// the packed product's numerics are tested there, whether or not the runtime's policy packs
// (cpu_packs_bf16_for_onednn: AMX only).
bool onednn_bf16_runs_here() { return onednn_packing_available() && (cpu_has_flag("avx512_bf16") || cpu_has_flag("amx_bf16")); }

// `got` = x times w (+ b) in bf16: float32 sums rounded once to bf16, so within a unit in the
// last place of bf16 (2^-8 relative) plus the float32 summation error of the float64 product;
// LibTorch's own linear must meet the same bound.
void expect_bf16_rounding_of_the_linear(const torch::Tensor& got, const torch::Tensor& x, const torch::Tensor& w,
                                        const c10::optional<torch::Tensor>& b) {
  const auto plain = torch::linear(x, w, b ? *b : torch::Tensor());
  ASSERT_EQ(got.sizes(), plain.sizes());
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  auto exact = torch::matmul(x.to(torch::kDouble), w.to(torch::kDouble).t());
  if (b) exact = exact + b->to(torch::kDouble);
  const auto bound = exact.abs() * std::ldexp(1.0, -8) + 1e-3;
  const auto err = (got.to(torch::kDouble) - exact).abs(), plain_err = (plain.to(torch::kDouble) - exact).abs();
  EXPECT_TRUE(err.le(bound).all().item<bool>()) << "worst excess " << (err - bound).max().item<double>();
  EXPECT_TRUE(plain_err.le(bound).all().item<bool>());
}

TEST(OnednnLinear, PackedProductIsTheLinearWithinBf16Rounding) {
  if (!onednn_bf16_runs_here()) GTEST_SKIP() << "no oneDNN operators or no bf16 instructions here";
  torch::manual_seed(2);
  const int64_t K = 1024, N = 320;
  const auto w = (torch::randn({N, K}) * 0.03).to(torch::kBFloat16), b = torch::randn({N}).to(torch::kBFloat16);
  const auto packed = pack_for_onednn(w);
  EXPECT_TRUE(packed.is_mkldnn());
  EXPECT_EQ(packed.sizes(), w.sizes());
  // one row (a decode-like call), the tower's 577, and five crops at once ([5, 577, K])
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, K}, {577, K}, {5, 577, K}}) {
    const auto x = torch::randn(shape).to(torch::kBFloat16);
    for (const bool with_bias : {true, false}) {
      const c10::optional<torch::Tensor> bias = with_bias ? c10::optional<torch::Tensor>(b) : c10::nullopt;
      expect_bf16_rounding_of_the_linear(onednn_linear(x, packed, bias), x, w, bias);
    }
  }
}

// Sets LibTorch's thread count for one scope.
struct Threads {
  explicit Threads(int n) : before(at::get_num_threads()) { at::set_num_threads(n); }
  ~Threads() { at::set_num_threads(before); }
  int before;
};

TEST(OnednnLinear, RowBlocksKeepAtLeast64RowsEach) {
  EXPECT_EQ(linear_row_blocks(577, 2), 2);  // the tower, two threads
  EXPECT_EQ(linear_row_blocks(577, 1), 1);
  EXPECT_EQ(linear_row_blocks(577, 16), 9);  // 64 rows a block at least
  EXPECT_EQ(linear_row_blocks(5 * 577, 16), 16);
  EXPECT_EQ(linear_row_blocks(128, 2), 2);
  EXPECT_EQ(linear_row_blocks(127, 2), 1);  // one block of 127: no split
  EXPECT_EQ(linear_row_blocks(1, 2), 1);
}

// A plain bf16 weight: the rows in blocks, one thread each; the same exact products with float32
// sums rounded once, as LibTorch's own linear.
TEST(OnednnLinear, PlainBf16WeightInRowBlocksIsTheLinearWithinBf16Rounding) {
  const Threads two(2);
  torch::manual_seed(4);
  const int64_t K = 256, N = 320;
  const auto w = (torch::randn({N, K}) * 0.06).to(torch::kBFloat16), b = torch::randn({N}).to(torch::kBFloat16);
  ASSERT_EQ(linear_row_blocks(577, at::get_num_threads()), 2);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{577, K}, {1, 577, K}, {5, 577, K}, {100, K}}) {
    const auto x = torch::randn(shape).to(torch::kBFloat16);
    for (const bool with_bias : {true, false}) {
      const c10::optional<torch::Tensor> bias = with_bias ? c10::optional<torch::Tensor>(b) : c10::nullopt;
      const auto got = onednn_linear(x, w, bias);
      expect_bf16_rounding_of_the_linear(got, x, w, bias);
      EXPECT_TRUE(got.is_contiguous());
      // each block is its own product: the second block's rows are those of a product of them alone
      const auto rows = x.reshape({-1, K});
      const int64_t half = rows.size(0) / 2;
      if (linear_row_blocks(rows.size(0), 2) == 2) {
        torch::Tensor alone;
        {
          const Threads one(1);
          alone = torch::linear(rows.narrow(0, half, rows.size(0) - half), w, with_bias ? b : torch::Tensor());
        }
        const auto block = got.reshape({-1, N}).narrow(0, half, rows.size(0) - half);
        EXPECT_TRUE(torch::equal(block, alone)) << "shape " << x.sizes() << ", bias " << with_bias;
      }
    }
  }
  // inside a parallel region, where nested products run on their thread alone: one product
  const auto x = torch::randn({577, K}).to(torch::kBFloat16);
  torch::Tensor nested[2];
  at::parallel_for(0, 2, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) nested[i] = onednn_linear(x, w, b);
  });
  for (const auto& got : nested) expect_bf16_rounding_of_the_linear(got, x, w, b);
  // float32: LibTorch's linear as it is
  const auto x32 = torch::randn({577, K}), w32 = torch::randn({N, K});
  EXPECT_TRUE(torch::equal(onednn_linear(x32, w32, c10::nullopt), torch::linear(x32, w32)));
}

TEST(OnednnLinear, RefusesWhatItCannotPack) {
  if (!onednn_packing_available()) GTEST_SKIP() << "no oneDNN operators in this LibTorch";
  EXPECT_THROW(pack_for_onednn(torch::randn({4, 8})), c10::Error);                          // float32
  EXPECT_THROW(pack_for_onednn(torch::randn({4, 8, 2}).to(torch::kBFloat16)), c10::Error);  // not 2-D
  const auto packed = pack_for_onednn(torch::randn({4, 8}).to(torch::kBFloat16));
  EXPECT_THROW(onednn_linear(torch::randn({3, 9}).to(torch::kBFloat16), packed, c10::nullopt), c10::Error);  // K
}

TEST(OnednnLinear, PolicyPacksBf16AutoSessionsOnCpusWithBf16Arithmetic) {
  ModelBundle bf16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  ModelBundle f32 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kFloat);
  EXPECT_FALSE(cpu_packs_bf16_for_onednn() && cpu_splits_bf16_linears_by_rows());  // one route or the other
  EXPECT_EQ(cpu_splits_bf16_linears_by_rows(),
            cpu_has_native_arithmetic(torch::kBFloat16) && !onednn_packing_available() && at::hasMKLDNN());
  EXPECT_EQ(cpu_routes_linears_to_onednn(bf16, CpuMatmul::kAuto),
            cpu_packs_bf16_for_onednn() || cpu_splits_bf16_linears_by_rows());
  EXPECT_FALSE(cpu_routes_linears_to_onednn(bf16, CpuMatmul::kNative));   // LibTorch's kernels as they are
  EXPECT_FALSE(cpu_routes_linears_to_onednn(bf16, CpuMatmul::kFloat32));  // widened: float32 BLAS
  EXPECT_FALSE(cpu_routes_linears_to_onednn(f32, CpuMatmul::kAuto));
}

TEST(OnednnLinear, SessionPacksTheVisionAndProjectorLinearsOnly) {
  for (const std::string mode : {"auto", "native"}) {
    SessionOptions o;
    o.dtype = "bfloat16";
    o.cpu_matmul = mode;
    Session s = Session::open(test::bundle_dir(), o);
    const ModelBundle& b = SessionAccess::state(s).bundle;
    const Packing vision = packing_of(b.vision), projector = packing_of(b.projector), decoder = packing_of(b.decoder);
    EXPECT_GE(vision.attentions, 1);
    EXPECT_EQ(vision.linears, 6 * vision.attentions);  // q/k/v/out, fc1, fc2 per layer
    EXPECT_EQ(projector.linears, 2);
    EXPECT_GT(decoder.linears, 0);
    const bool packs = mode == "auto" && cpu_packs_bf16_for_onednn();
    const bool routes = packs || (mode == "auto" && cpu_splits_bf16_linears_by_rows());
    // each layer's q/k/v become one product held by q_proj, k_proj's and v_proj's weights emptied
    EXPECT_EQ(vision.fused, routes ? vision.attentions : 0) << mode;
    EXPECT_EQ(vision.emptied, routes ? 2 * vision.attentions : 0) << mode;
    EXPECT_EQ(vision.routed, routes ? 4 * vision.attentions : 0) << mode;
    EXPECT_EQ(projector.routed, routes ? 2 : 0) << mode;
    EXPECT_EQ(vision.packed + projector.packed, packs ? vision.routed + projector.routed : 0) << mode;
    EXPECT_EQ(decoder.routed + decoder.packed + decoder.fused + decoder.emptied, 0)
        << mode << ": the decoder's decode steps read its plain weights";
    EXPECT_EQ(b.onednn_packed_linears, vision.packed + projector.packed);
    EXPECT_EQ(b.row_split_linears, routes && !packs ? vision.routed + projector.routed : 0);
  }
}

// The fused q/k/v product is the three separate ones: the same attention outputs and saliency
// maps as a plain bf16 session's tower, within bf16 rounding; packed where oneDNN multiplies bf16
// here, its rows split otherwise (that route needs no particular CPU).
TEST(OnednnLinear, FusedQkvTowerGivesTheUnpackedFeatures) {
  const Threads two(2);
  ModelBundle plain = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  ModelBundle packed = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  // what apply_cpu_matmul does where the policy routes
  ASSERT_GT(onednn_bf16_runs_here() ? pack_linears_for_onednn(packed.vision) : split_linears_by_rows(packed.vision), 0);
  torch::manual_seed(3);
  const int64_t side = plain.manifest.vision.image_size;
  const torch::Tensor px = torch::randn({1, 3, side, side});
  c10::InferenceMode guard;
  const auto a = plain.vision.forward({px}).toTuple()->elements(), b = packed.vision.forward({px}).toTuple()->elements();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const torch::Tensor x = a[i].toTensor().to(torch::kFloat), y = b[i].toTensor().to(torch::kFloat);
    ASSERT_EQ(x.sizes(), y.sizes()) << "output " << i;
    if (x.numel() == 0) continue;
    const double scale = x.abs().max().item<double>() + 1e-6;
    EXPECT_LT((x - y).abs().max().item<double>() / scale, 0.05) << "output " << i;
  }
}

TEST(OnednnLinear, PackedSessionKeepsTheBf16Logits) {
  if (!cpu_packs_bf16_for_onednn() && !cpu_splits_bf16_linears_by_rows()) GTEST_SKIP() << "the runtime routes nothing here";
  const torch::Tensor exact = test::prompt_logits("float32", "auto");
  const torch::Tensor native = test::prompt_logits("bfloat16", "native"), packed = test::prompt_logits("bfloat16", "auto");
  ASSERT_EQ(exact.sizes(), packed.sizes());
  const double scale = exact.abs().max().item<double>();
  const double err_packed = (packed - exact).abs().max().item<double>() / scale;
  const double err_native = (native - exact).abs().max().item<double>() / scale;
  std::cout << "bf16 against float32 logits, max error / max |logit|: packed " << err_packed << ", native " << err_native << "\n";
  // the same bf16 products with float32 sums, blocked differently: bf16 rounding of the float32
  // model, as the unpacked run
  EXPECT_LT(err_packed, 0.1);
  EXPECT_LE(err_packed, err_native * 1.5 + 1e-3);
}

}  // namespace era
