// The widened CPU product (model/cpu_widened_linear.h): era::widened_linear equals F.linear in
// float32 rounded once to x's dtype, for weights of one slice and of several (the last one short),
// any leading dimensions, with and without bias, empty shapes; the kept buffer serves calls of
// other shapes and dtypes in turn, and threads calling at once each get their own; the
// TorchScript operator the exported Linear calls, and that Linear's switch to it.
#include <gtest/gtest.h>

#include <algorithm>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include <thread>
#include <vector>

#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_linear.h"
#include "kernels/linear_test_util.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "test_support.h"

namespace era {
namespace {

torch::Tensor float32_linear(const torch::Tensor& x, const torch::Tensor& w, const c10::optional<torch::Tensor>& b) {
  return torch::linear(x.to(torch::kFloat), w.to(torch::kFloat), b ? b->to(torch::kFloat) : torch::Tensor());
}

// Both sides are LibTorch's float32 GEMM over the same values; only the blocking of the sums may
// differ (the slices): float32 results agree to summation-order error, rounded ones to one unit in
// their last place.
void expect_widened_close(const torch::Tensor& got, const torch::Tensor& want_f32, const std::string& what) {
  test::expect_close_to_float32(got, want_f32, what, 1e-5);
}

// Rows of a K-wide float32 weight that fill one slice: N above it takes several calls of the GEMM.
int64_t rows_per_slice(int64_t K) { return kWidenSliceBytes / (K * 4); }

TEST(CpuWidenedLinear, EqualsFloat32LinearRoundedOnceForOneSliceAndSeveral) {
  torch::manual_seed(0);
  const int64_t K = 512, several = 2 * rows_per_slice(K) + 37;  // two whole slices and a short one
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (const int64_t N : {int64_t{3}, int64_t{300}, several}) {
      for (const bool with_bias : {false, true}) {
        const torch::Tensor x = torch::randn({9, K}).to(dtype), w = torch::randn({N, K}).to(dtype);
        c10::optional<torch::Tensor> b;
        if (with_bias) b = torch::randn({N}).to(dtype);
        const torch::Tensor got = widened_linear(x, w, b);
        const std::string what = std::string(c10::toString(dtype)) + " N " + std::to_string(N) + (with_bias ? " bias" : "");
        ASSERT_EQ(got.sizes(), (std::vector<int64_t>{9, N})) << what;
        EXPECT_EQ(got.scalar_type(), dtype) << what;
        expect_widened_close(got, float32_linear(x, w, b), what);
        // float32 activations: the float32 result itself, with no rounding to hide a wrong column
        const torch::Tensor xf = x.to(torch::kFloat), exact = widened_linear(xf, w, b);
        EXPECT_EQ(exact.scalar_type(), torch::kFloat) << what;
        expect_widened_close(exact, float32_linear(xf, w, b), what + " float32");
      }
    }
  }
}

TEST(CpuWidenedLinear, KeepsLeadingDimensionsAndEmptyShapes) {
  torch::manual_seed(1);
  const torch::Tensor w = torch::randn({10, 32}).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({2, 3, 32}).to(torch::kBFloat16);
  const torch::Tensor got = widened_linear(x, w, c10::nullopt);
  EXPECT_EQ(got.sizes(), (std::vector<int64_t>{2, 3, 10}));
  expect_widened_close(got, float32_linear(x, w, c10::nullopt), "[2, 3, 32]");
  EXPECT_EQ(widened_linear(torch::randn({0, 32}).to(torch::kBFloat16), w, c10::nullopt).sizes(), (std::vector<int64_t>{0, 10}));
  const torch::Tensor b = torch::randn({10}).to(torch::kBFloat16);
  const torch::Tensor no_k =
      widened_linear(torch::randn({4, 0}).to(torch::kBFloat16), torch::randn({10, 0}).to(torch::kBFloat16), b);
  EXPECT_TRUE(torch::equal(no_k, b.expand({4, 10}))) << "K = 0: the bias alone";
  EXPECT_THROW(widened_linear(torch::randn({4, 31}), w, c10::nullopt), c10::Error);
  EXPECT_THROW(widened_linear(torch::randn({4, 32}), w, torch::randn({9})), c10::Error);
}

// The buffer is kept between calls: a call that needs less than an earlier one reuses its front,
// one that needs more grows it, and the weight dtype may change from call to call.
TEST(CpuWidenedLinear, TheKeptBufferServesCallsOfOtherShapesAndDtypes) {
  torch::manual_seed(2);
  const std::vector<std::pair<int64_t, torch::ScalarType>> calls = {{40, torch::kBFloat16},
                                                                    {3 * rows_per_slice(256), torch::kHalf},
                                                                    {7, torch::kBFloat16},
                                                                    {2 * rows_per_slice(256) + 5, torch::kChar}};
  for (const auto& [N, dtype] : calls) {
    const torch::Tensor x = torch::randn({5, 256});
    const torch::Tensor w =
        dtype == torch::kChar ? torch::randint(-127, 128, {N, 256}).to(torch::kChar) : torch::randn({N, 256}).to(dtype);
    expect_widened_close(sliced_products(x, w), torch::matmul(x, w.to(torch::kFloat).t()), "N " + std::to_string(N));
  }
}

// Each calling thread converts into its own buffer: four threads at once, each with its own
// weight, all get their own products (one shared buffer would mix the threads' slices).
TEST(CpuWidenedLinear, ThreadsCallingAtOnceEachGetTheirOwnProduct) {
  torch::manual_seed(3);
  const int64_t K = 256, N = 3 * rows_per_slice(K) + 11;
  std::vector<torch::Tensor> xs, ws, got(4);
  for (int t = 0; t < 4; ++t) {
    xs.push_back(torch::randn({6, K}));
    ws.push_back(torch::randn({N, K}).to(torch::kBFloat16));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) got[t] = widened_linear(xs[t], ws[t], c10::nullopt);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    expect_widened_close(got[t], float32_linear(xs[t], ws[t], c10::nullopt), "thread " + std::to_string(t));
}

TEST(CpuWidenedLinear, TheOperatorIsRegisteredAndRunsThePath) {
  register_era_operators();
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("era::widened_linear", "");
  EXPECT_EQ(c10::toString(op.schema()), "era::widened_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  const auto call = op.typed<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const c10::optional<torch::Tensor>&)>();
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({12, 40}).to(torch::kBFloat16), w = torch::randn({9, 40}).to(torch::kBFloat16);
  const torch::Tensor b = torch::randn({9}).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(call.call(x, w, b), widened_linear(x, w, b)));
}

// The exported Linear's switch: with cpu_upcast_min_rows set (what Session::open does on a CPU
// without bf16 arithmetic) a call of that many rows goes through era::widened_linear.
TEST(CpuWidenedLinear, ExportedLinearWidensThroughTheOperator) {
  ModelBundle b = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  apply_cpu_matmul(b, CpuMatmul::kFloat32);
  torch::jit::Module up =
      b.decoder.attr("layers").toModule().attr("0").toModule().attr("mlp").toModule().attr("up_proj").toModule();
  ASSERT_GT(up.attr("cpu_upcast_min_rows").toInt(), 0);
  // at least the widening threshold, and past the decode kernel's few rows (era::gemv takes those
  // first; on 1.13 the threshold is 1 row)
  const int64_t rows = std::max(up.attr("cpu_upcast_min_rows").toInt(), up.attr("gemv_max_rows").toInt() + 1);
  EXPECT_NE(up.get_method("forward").graph()->toString().find("era::widened_linear"), std::string::npos);
  const torch::Tensor w = up.attr("weight").toTensor();
  const torch::Tensor x = torch::randn({1, rows, w.size(1)}).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(up.forward({x}).toTensor(), widened_linear(x, w, c10::nullopt)));
}

}  // namespace
}  // namespace era
