// era's weight-only int8 linear (model/int8_linear.h): (x @ q^T) * scales + bias against a
// float64 reference on both of its paths (era's decode kernel for a few rows, the sliced GEMM
// for more), across vector tails, 4-row blocks, thread splits and weight slices; the GEMM in
// float32 where asked; its argument errors; the TorchScript operator bundles call; and the
// runtime's switch on a weight-only bundle's linears.
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_gemv.h"
#include "kernels/int8_linear.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "model/int8_test_util.h"
#include "test_support.h"

namespace era {
namespace {

struct Int8Weight {
  torch::Tensor q, scales, bias;
};

Int8Weight random_weight(int64_t N, int64_t K, bool with_bias) {
  Int8Weight w;
  w.q = torch::randint(-127, 128, {N, K}, torch::kLong).to(torch::kChar);
  w.scales = torch::rand({N}) * 0.02 + 0.001;
  if (with_bias) w.bias = torch::randn({N});
  return w;
}

// (x @ q^T) * scales + bias in float64.
torch::Tensor reference(const torch::Tensor& x, const Int8Weight& w) {
  torch::Tensor y = torch::matmul(x.to(torch::kDouble), w.q.to(torch::kDouble).t()) * w.scales.to(torch::kDouble);
  if (w.bias.defined()) y = y + w.bias.to(torch::kDouble);
  return y;
}

c10::optional<torch::Tensor> bias_of(const Int8Weight& w) {
  return w.bias.defined() ? c10::optional<torch::Tensor>(w.bias) : c10::nullopt;
}

// |got - want| within float32 summation-order error (relative to the sum of |terms|) plus, for
// bf16, two roundings: of the GEMM's output (a bf16 GEMM rounds its sums before they are scaled
// and the bias added) and of the result. `scaled_weights`: the weight was dequantised (q * scale)
// and rounded to got's dtype before the product (a GPU's GEMM path): half a step per term more.
void expect_close(const torch::Tensor& got, const torch::Tensor& x, const Int8Weight& w, const std::string& what,
                  bool scaled_weights = false) {
  const torch::Tensor want = reference(x, w);
  const torch::Tensor magnitude =
      torch::matmul(x.to(torch::kDouble).abs(), w.q.to(torch::kDouble).abs().t()) * w.scales.to(torch::kDouble);
  const double ulp = got.scalar_type() == torch::kBFloat16 ? 1.0 / 128 : got.scalar_type() == torch::kHalf ? 1.0 / 1024 : 1e-6;
  const torch::Tensor sums = w.bias.defined() ? (want - w.bias.to(torch::kDouble)).abs() : want.abs();
  const torch::Tensor diff = (got.cpu().to(torch::kDouble) - want).abs();
  const torch::Tensor bound = (want.abs() + sums) * ulp + magnitude * (2e-5 + (scaled_weights ? ulp / 2 : 0.0)) + 1e-6;
  EXPECT_TRUE(diff.le(bound).all().item<bool>()) << what << ": max error " << diff.max().item<double>();
}

TEST(Int8Linear, EqualsTheScaledInt8ProductOnTheKernelAndTheGemmPath) {
  torch::manual_seed(0);
  for (const int64_t rows : {1, 2, 3, 4, 5, 9}) {
    // K: whole vectors, a tail of 3, fewer than one vector, a block of 4 rows over 16 KB (its
    // prefetch goes to L2, model/cpu_gemv.cpp); N: one block, blocks plus a tail, enough rows for
    // both threads (task edges off the 4-row blocks)
    for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{{64, 4}, {67, 7}, {5, 3}, {96, 1001}, {4100, 9}}) {
      for (const bool with_bias : {false, true}) {
        for (const int64_t gemv_rows : {int64_t{0}, kGemvMaxRows}) {
          const Int8Weight w = random_weight(N, K, with_bias);
          const torch::Tensor x = torch::randn({rows, K});
          const torch::Tensor got = int8_linear(x, w.q, w.scales, bias_of(w), gemv_rows, 0);
          const std::string what = "rows " + std::to_string(rows) + " K " + std::to_string(K) + " N " + std::to_string(N) +
                                   (with_bias ? " bias" : "") + " gemv_max_rows " + std::to_string(gemv_rows);
          ASSERT_EQ(got.sizes(), (std::vector<int64_t>{rows, N})) << what;
          EXPECT_EQ(got.scalar_type(), torch::kFloat) << what;
          expect_close(got, x, w, what);
        }
      }
    }
  }
}

TEST(Int8Linear, ConvertsWideWeightsASliceOfRowsAtATime) {
  // K = 8192 in float32: 512 rows per 16 MB slice, so 1100 rows are three GEMMs, the last one short
  torch::manual_seed(1);
  const Int8Weight w = random_weight(1100, 8192, true);
  const torch::Tensor x = torch::randn({6, 8192});
  expect_close(int8_linear(x, w.q, w.scales, bias_of(w), 0, 0), x, w, "1100 x 8192, 6 rows");
}

TEST(Int8Linear, KeepsTheActivationDtypeAndLeadingDimensions) {
  torch::manual_seed(2);
  const Int8Weight w = random_weight(33, 40, true);
  for (const int64_t gemv_rows : {int64_t{0}, kGemvMaxRows}) {
    const torch::Tensor x = torch::randn({2, 1, 40}).to(torch::kBFloat16);  // [B, T, K], 2 rows
    const torch::Tensor got = int8_linear(x, w.q, w.scales, bias_of(w), gemv_rows, 0);
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{2, 1, 33}));
    EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
    expect_close(got.reshape({2, 33}), x.reshape({2, 40}), w, "bf16 activations, gemv_max_rows " + std::to_string(gemv_rows));
  }
  const torch::Tensor none = int8_linear(torch::randn({0, 40}), w.q, w.scales, bias_of(w), kGemvMaxRows, 0);
  EXPECT_EQ(none.sizes(), (std::vector<int64_t>{0, 33}));
}

// upcast_min_rows: from that many rows the GEMM runs in float32 and the result is rounded to bf16
// once, as the reference is; below it, the GEMM runs in bf16.
TEST(Int8Linear, MultipliesInFloat32FromUpcastMinRows) {
  torch::manual_seed(3);
  const Int8Weight w = random_weight(64, 512, false);
  const torch::Tensor x = torch::randn({8, 512}).to(torch::kBFloat16);
  const torch::Tensor want = reference(x, w).to(torch::kFloat).to(torch::kBFloat16);
  const torch::Tensor widened = int8_linear(x, w.q, w.scales, c10::nullopt, 0, 8);
  // float32 sums rounded once: at most one bf16 step from the float64 product rounded once
  const double step =
      (widened.to(torch::kDouble) - want.to(torch::kDouble)).abs().div(want.to(torch::kDouble).abs() + 1e-3).max().item<double>();
  EXPECT_LE(step, 1.0 / 128);
  expect_close(widened, x, w, "float32 GEMM");
  expect_close(int8_linear(x, w.q, w.scales, c10::nullopt, 0, 9), x, w, "bf16 GEMM (8 rows < upcast_min_rows 9)");
}

// On a GPU (skipped without one): era's CUDA kernel for up to kInt8CudaMaxRows rows where K is a
// multiple of 16, the dequantised weight's cuBLAS GEMM for more, the converted-weight GEMM where
// K is not; float32 / fp16 / bf16 activations, with and
// without bias, against the same float64 reference, and the kernel against the GEMM path.
TEST(Int8Linear, EqualsTheScaledInt8ProductOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ASSERT_EQ(int8_cuda_kernel_max_rows(), 4) << "a CUDA device, but era was built without its CUDA kernels";
  torch::manual_seed(6);
  const torch::Device gpu(torch::kCUDA);
  for (const torch::ScalarType dtype : {torch::kFloat, torch::kHalf, torch::kBFloat16}) {
    for (const int64_t rows : {1, 2, 3, 4, 5, 64}) {
      for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{{48, 33}, {40, 7}, {4096, 1000}, {11008, 64}}) {
        for (const bool with_bias : {false, true}) {
          Int8Weight w = random_weight(N, K, with_bias);
          const torch::Tensor x = torch::randn({rows, K}).to(dtype);
          if (with_bias) w.bias = w.bias.to(dtype).to(torch::kFloat);  // the bias as the bundle stores it
          const auto bias = with_bias ? c10::optional<torch::Tensor>(w.bias.to(gpu, dtype)) : c10::nullopt;
          const std::string what = c10::toString(dtype) + std::string(" rows ") + std::to_string(rows) + " K " +
                                   std::to_string(K) + " N " + std::to_string(N) + (with_bias ? " bias" : "");
          const torch::Tensor kernel = int8_linear(x.to(gpu), w.q.to(gpu), w.scales.to(gpu), bias, 4, 0);
          const torch::Tensor gemm = int8_linear(x.to(gpu), w.q.to(gpu), w.scales.to(gpu), bias, 0, 0);
          ASSERT_TRUE(kernel.is_cuda()) << what;
          ASSERT_EQ(kernel.sizes(), (std::vector<int64_t>{rows, N})) << what;
          EXPECT_EQ(kernel.scalar_type(), dtype) << what;
          expect_close(kernel, x.to(torch::kFloat), w, what + " kernel");
          expect_close(gemm, x.to(torch::kFloat), w, what + " GEMM path", K % 16 == 0);
        }
      }
    }
  }
}

TEST(Int8Linear, RefusesMismatchedArgumentsNamingThem) {
  const Int8Weight w = random_weight(8, 16, true);
  const auto expect_refused = [](const std::function<void()>& call, const std::string& word) {
    try {
      call();
      FAIL() << "accepted; expected an error naming " << word;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  const torch::Tensor x = torch::randn({1, 16});
  expect_refused([&] { int8_linear(x, w.q.to(torch::kFloat), w.scales, bias_of(w), 4, 0); }, "weight must be int8");
  expect_refused([&] { int8_linear(torch::randn({1, 15}), w.q, w.scales, bias_of(w), 4, 0); }, "does not match weight");
  expect_refused([&] { int8_linear(x, w.q, w.scales.narrow(0, 0, 7), bias_of(w), 4, 0); }, "scales");
  expect_refused([&] { int8_linear(x, w.q, w.scales, torch::randn({9}), 4, 0); }, "bias");
}

TEST(Int8Linear, TheOperatorIsRegisteredWithTheBundleSchema) {
  register_era_operators();
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("era::int8_linear", "");
  EXPECT_EQ(
      c10::toString(op.schema()),
      "era::int8_linear(Tensor x, Tensor weight, Tensor scales, Tensor? bias, int gemv_max_rows, int upcast_min_rows) -> Tensor");
  const auto call = op.typed<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                           const c10::optional<torch::Tensor>&, int64_t, int64_t)>();
  torch::manual_seed(4);
  const Int8Weight w = random_weight(9, 40, true);
  const torch::Tensor x = torch::randn({1, 40});
  EXPECT_TRUE(torch::equal(call.call(x, w.q, w.scales, w.bias, 4, 0), int8_linear(x, w.q, w.scales, w.bias, 4, 0)));
}

// A weight-only bundle's linears: exported with the kernel on for decode steps; the runtime keeps
// it on for any model dtype (the tiny bundle is float32) and turns it off for --cpu-matmul native.
// Either way a one-row call gives the same product.
TEST(Int8Linear, TheRuntimeSwitchesTheKernelOnEveryWeightOnlyLinear) {
  ModelBundle b = load_bundle(test::int8_bundle_dir(), torch::kCPU);
  ASSERT_EQ(b.manifest.int8_scheme, "weight-only");
  torch::jit::Module lm_head = b.decoder.attr("lm_head").toModule();
  const torch::Tensor q = lm_head.attr("weight").toTensor();
  EXPECT_EQ(q.scalar_type(), torch::kChar);
  int64_t int8_bytes = 0;
  for (const torch::jit::Module m : b.decoder.modules()) {
    if (m.hasattr("scales")) int8_bytes += m.attr("weight").toTensor().numel();
  }
  EXPECT_EQ(int8_bytes, test::decoder_int8_weight_bytes(b.manifest));  // every decoder linear, one byte per weight
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({1, 1, q.size(1)});
  std::vector<torch::Tensor> outputs;
  for (const CpuMatmul mode : {CpuMatmul::kAuto, CpuMatmul::kNative}) {
    apply_cpu_matmul(b, mode);
    const int64_t expected = mode == CpuMatmul::kAuto && gemv_kernel_available() ? kGemvMaxRows : 0;
    EXPECT_EQ(int8_gemv_max_rows(b, mode), expected) << cpu_matmul_name(mode);
    for (const torch::jit::Module m : b.decoder.modules()) {
      if (m.hasattr("scales")) {
        EXPECT_EQ(m.attr("gemv_max_rows").toInt(), expected) << cpu_matmul_name(mode);
      }
    }
    outputs.push_back(lm_head.forward({x}).toTensor());
  }
  EXPECT_TRUE(torch::allclose(outputs[0], outputs[1], 1e-5, 1e-5));
}

// A float32-exported int8 bundle loaded in bf16 (--dtype bfloat16): its floating-point weights
// become bf16 and its int8 weights stay int8. LibTorch's Module::to(dtype) converted them too, and
// the first decoder call then failed in era::int8_linear.
TEST(Int8Linear, ABundleLoadedInAnotherDtypeKeepsItsInt8Weights) {
  ModelBundle b = load_bundle(test::int8_bundle_dir(), torch::kCPU, torch::kBFloat16);
  ASSERT_EQ(b.manifest.dtype, "float32");
  int64_t int8_bytes = 0, floating = 0;
  for (const torch::jit::Module m : b.decoder.modules()) {
    if (m.hasattr("scales")) {
      const torch::Tensor w = m.attr("weight").toTensor();
      EXPECT_EQ(w.scalar_type(), torch::kChar);
      int8_bytes += w.numel();
      EXPECT_EQ(m.attr("scales").toTensor().scalar_type(), torch::kFloat) << "scales were converted with the weights";
    }
  }
  EXPECT_EQ(int8_bytes, test::decoder_int8_weight_bytes(b.manifest));
  for (const torch::Tensor& p : b.decoder.parameters()) {
    if (!p.is_floating_point()) continue;
    EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
    ++floating;
  }
  EXPECT_GT(floating, 0);  // the norms and the embedding table
  apply_cpu_matmul(b, CpuMatmul::kAuto);
  torch::jit::Module lm_head = b.decoder.attr("lm_head").toModule();
  const torch::Tensor y =
      lm_head.forward({torch::randn({1, 1, lm_head.attr("weight").toTensor().size(1)}).to(torch::kBFloat16)}).toTensor();
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
}

// On a GPU the int8 linears take era's CUDA kernel in every CPU mode where era has it (the mode is
// the CPU's business), and none where it was built without (a CPU-only LibTorch).
TEST(Int8Linear, OnCudaTheKernelRowsAreTheCudaKernels) {
  ModelBundle b;
  b.device = torch::Device(torch::kCUDA);
  for (const CpuMatmul mode : {CpuMatmul::kAuto, CpuMatmul::kFloat32, CpuMatmul::kNative}) {
    EXPECT_EQ(int8_gemv_max_rows(b, mode), int8_cuda_kernel_max_rows()) << cpu_matmul_name(mode);
  }
  EXPECT_EQ(int8_cuda_kernel_max_rows(), ERA_BUILD_HAS_CUDA ? 4 : 0);
}

}  // namespace
}  // namespace era
