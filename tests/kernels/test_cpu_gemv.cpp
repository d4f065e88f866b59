// era's decode kernel (model/cpu_gemv.h): F.linear's result for bf16 / fp16 weights over one to
// four rows, any width (vector tails, row blocks split between threads), with and without bias;
// LibTorch's product outside its domain; the TorchScript operator the exported Linear calls; and
// the intra-op threads really reached (the OpenMP compile of its file).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include "kernels/cpu_gemv.h"
#include "kernels/linear_test_util.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "test_support.h"
#include "util/kernel_threads.h"

namespace era {
namespace {

using test::expect_close_to_float32;

TEST(CpuGemv, KernelIsAvailableWhereTheCpuHasAvx2FmaF16c) {
  EXPECT_EQ(gemv_kernel_available(), cpu_has_flag("avx2") && cpu_has_flag("fma") && cpu_has_flag("f16c"));
}

TEST(CpuGemv, Bfloat16TakesTheBestLoopTheCpuHas) {
  if (!gemv_kernel_available()) GTEST_SKIP() << "no AVX2 kernel on this CPU";
  const bool avx512 = cpu_has_flag("avx512f") && cpu_has_flag("avx512bw");
  const GemvLoop want = !avx512 ? GemvLoop::kAvx2 : cpu_has_flag("avx512_bf16") ? GemvLoop::kAvx512Bf16 : GemvLoop::kAvx512;
  EXPECT_EQ(gemv_best_loop(), want);
  EXPECT_EQ(gemv_bf16_loop(), want);
  limit_gemv_loop(GemvLoop::kAvx2);
  EXPECT_EQ(gemv_bf16_loop(), GemvLoop::kAvx2);
  limit_gemv_loop(GemvLoop::kAvx512Bf16);
  EXPECT_EQ(gemv_bf16_loop(), want);
}

// Every loop the CPU has (bf16 weights: the best one, then each plainer one by limit_gemv_loop);
// bf16 activations take the AVX512-BF16 loop where the CPU has it, float32 / fp16 ones the
// widening loops.
TEST(CpuGemv, EqualsLinearForBfloat16AndFloat16Weights) {
  torch::manual_seed(0);
  for (const GemvLoop loop : {GemvLoop::kAvx512Bf16, GemvLoop::kAvx512, GemvLoop::kAvx2}) {
    if (loop > gemv_best_loop()) continue;
    limit_gemv_loop(loop);
    ASSERT_EQ(gemv_bf16_loop(), loop);
    for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
      for (const int64_t rows : {1, 2, 3, 4}) {
        // K: whole vectors, a tail of 3, fewer than one vector, and a block of 4 rows too large to
        // prefetch into L1 (over 16 KB: prefetched to L2), and tails past the bf16 dot loop's
        // 64- and 32-element steps; N: one block, blocks plus a tail, enough rows for both threads
        // (chunk edges off the 4-row blocks)
        for (const auto& [K, N] :
             std::vector<std::pair<int64_t, int64_t>>{{64, 4}, {67, 7}, {5, 3}, {96, 1001}, {4100, 9}, {127, 6}, {31, 5}}) {
          for (const bool with_bias : {false, true}) {
            const torch::Tensor x = torch::randn({rows, K}).to(dtype), w = torch::randn({N, K}).to(dtype);
            c10::optional<torch::Tensor> b;
            if (with_bias) b = torch::randn({N}).to(dtype);
            const torch::Tensor got = gemv_linear(x, w, b);
            const torch::Tensor want =
                torch::linear(x.to(torch::kFloat), w.to(torch::kFloat), b ? b->to(torch::kFloat) : torch::Tensor());
            const std::string what = std::string(c10::toString(dtype)) + " rows " + std::to_string(rows) + " K " +
                                     std::to_string(K) + " N " + std::to_string(N) + (with_bias ? " bias" : "") + " loop " +
                                     std::to_string(static_cast<int>(loop));
            ASSERT_EQ(got.sizes(), want.sizes()) << what;
            EXPECT_EQ(got.scalar_type(), dtype) << what;
            expect_close_to_float32(got, want, what);
          }
        }
      }
    }
  }
  limit_gemv_loop(GemvLoop::kAvx512Bf16);
}

// The sums' epilogue: scales and bias applied in float32 and one rounding to the asked dtype,
// without them, exactly the float32 result's own rounding (LibTorch's conversion).
TEST(CpuGemv, FusedEpilogueRoundsTheFloat32ResultOnce) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({3, 200}).to(torch::kBFloat16), w = torch::randn({50, 200}).to(torch::kBFloat16);
  const torch::Tensor scales = torch::rand({50}) + 0.5, bias = torch::randn({50}).to(torch::kBFloat16);
  const torch::Tensor sums = gemv_products(x, w);
  EXPECT_EQ(sums.scalar_type(), torch::kFloat);
  const torch::Tensor want = (sums * scales + bias.to(torch::kFloat));
  for (const auto out : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    const torch::Tensor got = gemv_fused(x, w, scales, bias, out);
    ASSERT_EQ(got.scalar_type(), out);
    // the same sums times the scale plus the bias (an FMA may fuse the two), rounded once
    expect_close_to_float32(got, want, std::string("fused to ") + c10::toString(out));
  }
  EXPECT_TRUE(torch::equal(gemv_fused(x, w, torch::Tensor(), c10::nullopt, torch::kBFloat16), sums.to(torch::kBFloat16)));
}

TEST(CpuGemv, KeepsLeadingDimensionsAndFloat32Activations) {
  torch::manual_seed(1);
  const torch::Tensor w = torch::randn({10, 32}).to(torch::kBFloat16);
  const torch::Tensor x = torch::randn({2, 1, 32});  // [B, T, K], 2 rows
  const torch::Tensor got = gemv_linear(x, w, c10::nullopt);
  EXPECT_EQ(got.sizes(), (std::vector<int64_t>{2, 1, 10}));
  EXPECT_EQ(got.scalar_type(), torch::kFloat);
  expect_close_to_float32(got, torch::linear(x, w.to(torch::kFloat)), "float32 x, bf16 w");
}

TEST(CpuGemv, OutsideItsDomainIsLibTorchsProduct) {
  torch::manual_seed(2);
  const torch::Tensor w32 = torch::randn({6, 16}), x32 = torch::randn({1, 16});
  EXPECT_TRUE(torch::equal(gemv_linear(x32, w32, c10::nullopt), torch::linear(x32, w32)));  // float32 weights
  const torch::Tensor w = w32.to(torch::kBFloat16), x5 = torch::randn({5, 16}).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(gemv_linear(x5, w, c10::nullopt), torch::linear(x5, w)));  // 5 rows > kGemvMaxRows
  const torch::Tensor x0 = torch::randn({0, 16}).to(torch::kBFloat16);
  EXPECT_EQ(gemv_linear(x0, w, c10::nullopt).sizes(), (std::vector<int64_t>{0, 6}));
}

TEST(CpuGemv, RunsOnEveryIntraOpThread) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  set_kernel_threads(0);  // follow LibTorch (a session opened earlier in this process may have set it)
  EXPECT_EQ(parallel_for_threads(), 2) << "era's kernel loop ran on one thread: its file lacks OpenMP";
  at::set_num_threads(before);
}

// Beside Debian's pthread OpenBLAS a session keeps LibTorch at one thread; the decode kernel still
// takes the count the session set for it (util/kernel_threads.h).
TEST(CpuGemv, RunsOnTheKernelThreadsWhereLibTorchKeepsOne) {
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  set_kernel_threads(2);
  EXPECT_EQ(parallel_for_threads(), 2);
  // and the product is the same on one thread and on two
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({37, 4100}).to(torch::kBFloat16), x = torch::randn({2, 4100});
  const torch::Tensor two = gemv_products(x, w);
  set_kernel_threads(1);
  EXPECT_EQ(parallel_for_threads(), 1);
  EXPECT_TRUE(torch::equal(gemv_products(x, w), two));
  set_kernel_threads(0);
  at::set_num_threads(before);
}

TEST(CpuGemv, TheOperatorIsRegisteredAndDispatchesToTheKernel) {
  register_era_operators();
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("era::gemv", "");
  EXPECT_EQ(c10::toString(op.schema()), "era::gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  const auto call = op.typed<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const c10::optional<torch::Tensor>&)>();
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({1, 40}).to(torch::kBFloat16), w = torch::randn({9, 40}).to(torch::kBFloat16);
  const torch::Tensor b = torch::randn({9}).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(call.call(x, w, b), gemv_linear(x, w, b)));
}

// The exported Linear's switch: with gemv_max_rows set (what Session::open does on an AVX2 CPU
// for a bf16 model) a one-row call goes through era::gemv, with its result.
TEST(CpuGemv, ExportedLinearHandsOneRowCallsToTheKernel) {
  ModelBundle b = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  int linears = 0;
  for (torch::jit::Module m : b.decoder.modules()) {
    if (!m.hasattr("gemv_max_rows")) continue;
    ++linears;
    EXPECT_EQ(m.attr("gemv_max_rows").toInt(), 0);  // exported off
  }
  EXPECT_EQ(linears, 7 * b.manifest.text.num_layers + 1);  // q/k/v/o, gate/up/down per layer, lm_head
  apply_cpu_matmul(b, CpuMatmul::kFloat32);
  torch::jit::Module lm_head = b.decoder.attr("lm_head").toModule();
  EXPECT_EQ(lm_head.attr("gemv_max_rows").toInt(), gemv_kernel_available() ? kGemvMaxRows : 0);
  EXPECT_NE(lm_head.get_method("forward").graph()->toString().find("era::gemv"), std::string::npos);
  const torch::Tensor w = lm_head.attr("weight").toTensor();
  const torch::Tensor x = torch::randn({1, 1, w.size(1)}).to(torch::kBFloat16);
  const torch::Tensor got = lm_head.forward({x}).toTensor();
  EXPECT_TRUE(torch::equal(got, gemv_linear(x, w, c10::nullopt)));
}

}  // namespace
}  // namespace era
