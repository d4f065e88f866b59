// Where a bfloat16 model multiplies in float32 on the CPU (model/cpu_matmul.h): the policy per
// device, dtype and mode; the attribute reaching every exported Linear and attention core; and a
// bf16 session widened to float32 giving the prompt logits of the native bf16 run within bf16
// rounding (same numerics, another kernel).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "bundle_session.h"
#include "era/era.h"
#include "kernels/cpu_gemv.h"
#include "kernels/cpu_widened_attention.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "pipeline/session_internals.h"
#include "test_support.h"
#include "util/compat.h"

namespace era {
namespace {

constexpr const char* kAttribute = "cpu_upcast_min_rows";

// The attribute's value in every module of `top` that has it.
std::vector<int64_t> attribute_values(const torch::jit::Module& top) {
  std::vector<int64_t> out;
  for (const torch::jit::Module m : top.modules()) {
    if (m.hasattr(kAttribute)) out.push_back(m.attr(kAttribute).toInt());
  }
  return out;
}

std::vector<int64_t> attribute_values(const ModelBundle& b) {
  std::vector<int64_t> out;
  for (const torch::jit::Module* top : {&b.vision, &b.projector, &b.decoder}) {
    const auto v = attribute_values(*top);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The exported LayerNorms (the vision tower's) and their float32_on_cpu switch.
std::vector<torch::jit::Module> layer_norms(const ModelBundle& b) {
  std::vector<torch::jit::Module> out;
  for (const torch::jit::Module* top : {&b.vision, &b.projector, &b.decoder}) {
    for (const torch::jit::Module m : top->modules()) {
      if (m.hasattr("float32_on_cpu")) out.push_back(m);
    }
  }
  return out;
}

TEST(CpuMatmul, ParsesTheThreeModesAndNamesABadOne) {
  EXPECT_EQ(parse_cpu_matmul("auto"), CpuMatmul::kAuto);
  EXPECT_EQ(parse_cpu_matmul("float32"), CpuMatmul::kFloat32);
  EXPECT_EQ(parse_cpu_matmul("native"), CpuMatmul::kNative);
  test::expect_invalid_argument([] { parse_cpu_matmul("fast"); }, "cpu_matmul 'fast'");
  for (auto m : {CpuMatmul::kAuto, CpuMatmul::kFloat32, CpuMatmul::kNative}) EXPECT_EQ(parse_cpu_matmul(cpu_matmul_name(m)), m);
}

// bf16 arithmetic: AMX-BF16 anywhere, AVX512-BF16 on AMD only (Zen 5: oneDNN's bf16 GEMM at 4.6x
// the float32 rate; a Sapphire Rapids VM with AMX hidden: 0.64x).
TEST(CpuMatmul, Bfloat16IsNativeWithAmxOrOnAmdWithAvx512Bf16) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool amd = false;
  while (std::getline(in, line))
    if (line.rfind("vendor_id", 0) == 0) {
      amd = line.find("AuthenticAMD") != std::string::npos;
      break;
    }
  EXPECT_EQ(cpu_has_native_arithmetic(torch::kBFloat16), cpu_has_flag("amx_bf16") || (amd && cpu_has_flag("avx512_bf16")));
}

TEST(CpuMatmul, Float32ModelsAndNativeModeAreNeverWidened) {
  ModelBundle f32 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kFloat);
  for (auto m : {CpuMatmul::kAuto, CpuMatmul::kFloat32, CpuMatmul::kNative}) EXPECT_EQ(cpu_upcast_min_rows(f32, m), 0);
  ModelBundle bf16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(cpu_upcast_min_rows(bf16, CpuMatmul::kNative), 0);
  // a one-row decode step stays in bf16 where LibTorch's bf16 kernels are vectorised (2.x)
  EXPECT_EQ(cpu_upcast_min_rows(bf16, CpuMatmul::kFloat32), compat::kVectorisedReducedPrecisionMatmul ? 8 : 1);
  EXPECT_EQ(cpu_upcast_min_rows(bf16, CpuMatmul::kAuto),
            cpu_has_native_arithmetic(torch::kBFloat16) ? 0 : cpu_upcast_min_rows(bf16, CpuMatmul::kFloat32));
  EXPECT_TRUE(cpu_has_native_arithmetic(torch::kFloat));
}

// fp16 is widened unless the CPU has AMX-FP16 (AVX512-FP16 alone: LibTorch's fp16 GEMM at half
// its float32 rate; LibTorch 1.13: no CPU fp16 matmul at all), and the fp16 model then runs.
TEST(CpuMatmul, Float16IsWidenedWithoutAmxFp16) {
  EXPECT_EQ(cpu_has_native_arithmetic(torch::kHalf), cpu_has_flag("amx_fp16") && compat::kVectorisedReducedPrecisionMatmul);
  if (!compat::kVectorisedReducedPrecisionMatmul) GTEST_SKIP() << "LibTorch 1.13 refuses fp16 on the CPU at load";
  ModelBundle fp16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kHalf);
  if (cpu_has_native_arithmetic(torch::kHalf)) GTEST_SKIP() << "this CPU has AMX-FP16";
  EXPECT_GT(cpu_upcast_min_rows(fp16, CpuMatmul::kAuto), 0);
}

// era's decode kernel serves every bf16 / fp16 CPU bundle except in kNative, whether or not the
// CPU has bf16 arithmetic (a decode step is memory-bound: the kernel streams faster than
// LibTorch's bf16 GEMV on an AMX CPU too).
TEST(CpuMatmul, DecodeKernelServesNarrowCpuBundlesInEveryModeButNative) {
  const int64_t on = gemv_kernel_available() ? kGemvMaxRows : 0;
  ModelBundle f32 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kFloat);
  for (auto m : {CpuMatmul::kAuto, CpuMatmul::kFloat32, CpuMatmul::kNative}) EXPECT_EQ(cpu_gemv_max_rows(f32, m), 0);
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    if (dtype == torch::kHalf && !compat::kVectorisedReducedPrecisionMatmul) continue;  // refused at load on 1.13
    ModelBundle b = load_bundle(test::bundle_dir(), torch::kCPU, dtype);
    EXPECT_EQ(cpu_gemv_max_rows(b, CpuMatmul::kAuto), on);
    EXPECT_EQ(cpu_gemv_max_rows(b, CpuMatmul::kFloat32), on);
    EXPECT_EQ(cpu_gemv_max_rows(b, CpuMatmul::kNative), 0);
  }
}

// The values of a boolean attribute `name` on every submodule of `top` that has it.
std::vector<bool> bool_attributes(const torch::jit::Module& top, const std::string& name) {
  std::vector<bool> out;
  for (torch::jit::Module m : top.modules())
    if (m.hasattr(name)) out.push_back(m.attr(name).toBool());
  return out;
}

// A runtime switch's life: off as exported, `on_here` under kAuto, off again under kNative, never
// on for a float32 model.
void expect_switch(const std::function<std::vector<bool>(ModelBundle&)>& flags, bool on_here) {
  ModelBundle bf16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  for (bool e : flags(bf16)) EXPECT_FALSE(e);  // exported off
  apply_cpu_matmul(bf16, CpuMatmul::kAuto);
  for (bool e : flags(bf16)) EXPECT_EQ(e, on_here);
  apply_cpu_matmul(bf16, CpuMatmul::kNative);
  for (bool e : flags(bf16)) EXPECT_FALSE(e);
  ModelBundle f32 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kFloat);
  apply_cpu_matmul(f32, CpuMatmul::kAuto);
  for (bool e : flags(f32)) EXPECT_FALSE(e);
}

// The exported SDPA cores' eager_decode: on where the CPU has bf16 arithmetic (the step's small
// products then run in oneDNN's bf16 kernels, 3-4x faster than the fused kernel for one query),
// in every mode but kNative; never for a float32 model. Math cores (1.13's bundles) have none.
TEST(CpuMatmul, SdpaCoresDecodeEagerlyWhereTheCpuMultipliesBf16) {
  auto eager_flags = [](ModelBundle& b) { return bool_attributes(b.decoder, "eager_decode"); };
  ModelBundle bf16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  if (eager_flags(bf16).empty()) GTEST_SKIP() << "this bundle's decoder has math attention cores";
  EXPECT_EQ(eager_flags(bf16).size(), static_cast<size_t>(bf16.manifest.text.num_layers + 1));  // layers + attend()
  expect_switch(eager_flags, cpu_has_native_arithmetic(torch::kBFloat16));
}

// The exported decoder attention cores' decode_kernel (either kind): a one-token step in
// era::widened_attention, which reads the cache in place, wherever its AVX2 path runs, in every
// mode but kNative; never for a float32 model.
TEST(CpuMatmul, DecoderCoresTakeTheDecodeKernelWhereItsAvx2PathRuns) {
  auto flags = [](ModelBundle& b) { return bool_attributes(b.decoder, "decode_kernel"); };
  ModelBundle bf16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(flags(bf16).size(), static_cast<size_t>(bf16.manifest.text.num_layers + 1));  // layers + attend()
  expect_switch(flags, attention_isa_available(AttentionIsa::kAvx2));
}

// The exported vision attention cores' per_head_kernel: era::widened_attention's kernel where the
// CPU's bf16 arithmetic is AVX512-BF16 without AMX (in every mode but kNative); never for a
// float32 model.
TEST(CpuMatmul, VisionCoresTakeThePerHeadKernelWhereTheCpuMultipliesBf16) {
  auto flags = [](ModelBundle& b) { return bool_attributes(b.vision, "per_head_kernel"); };
  ModelBundle bf16 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  ASSERT_FALSE(flags(bf16).empty());  // one core per exported layer
  expect_switch(flags, cpu_has_native_arithmetic(torch::kBFloat16) && !cpu_has_flag("amx_bf16"));
}

TEST(CpuMatmul, ReachesEveryExportedLinearAndAttentionCore) {
  ModelBundle b = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  const auto exported = attribute_values(b);
  // decoder: q/k/v/o, gate/up/down and the attention core per layer, lm_head, and the core of
  // attend(); projector: its two linears; vision: at least one layer's q/k/v/out, fc1/fc2 and
  // attention
  EXPECT_EQ(attribute_values(b.decoder).size(), static_cast<size_t>(8 * b.manifest.text.num_layers + 2));
  EXPECT_EQ(attribute_values(b.projector).size(), 2u);
  EXPECT_GE(attribute_values(b.vision).size(), 7u);
  EXPECT_EQ(attribute_values(b.vision).size() % 7, 0u);
  for (int64_t v : exported) EXPECT_EQ(v, 0);  // exported off
  size_t vision_cores = 0;                     // the attention cores under CLIPAttention (per_head_kernel)
  for (torch::jit::Module m : b.vision.modules()) vision_cores += m.hasattr("per_head_kernel");
  EXPECT_GT(vision_cores, 0u);
  EXPECT_EQ(apply_cpu_matmul(b, CpuMatmul::kFloat32), static_cast<int>(exported.size() + layer_norms(b).size() + vision_cores));
  for (int64_t v : attribute_values(b)) EXPECT_EQ(v, cpu_upcast_min_rows(b, CpuMatmul::kFloat32));
  apply_cpu_matmul(b, CpuMatmul::kNative);
  for (int64_t v : attribute_values(b)) EXPECT_EQ(v, 0);
}

// On LibTorch 1.13 the tower's LayerNorms normalise in float32 and round once, whether or not the
// products are widened: faster than 1.13's bf16 kernel and closer to the exact norm (2.x's bf16
// kernel already computes so, and keeps it). kNative and float32 bundles keep LibTorch's kernel.
TEST(CpuMatmul, LayerNormsNormaliseInFloat32WhereLibTorchsBf16NormRoundsPerStep) {
  ModelBundle b = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
  const auto norms = layer_norms(b);
  // pre_layrnorm and two per encoder layer
  EXPECT_EQ(norms.size() % 2, 1u);
  ASSERT_GE(norms.size(), 3u);
  for (const torch::jit::Module& m : norms) EXPECT_FALSE(m.attr("float32_on_cpu").toBool());  // exported off
  apply_cpu_matmul(b, CpuMatmul::kFloat32);
  for (const torch::jit::Module& m : norms) EXPECT_EQ(m.attr("float32_on_cpu").toBool(), compat::kBf16LayerNormRoundsPerStep);
  {  // kAuto too, where the CPU's bf16 arithmetic keeps the products in bf16
    ModelBundle a = load_bundle(test::bundle_dir(), torch::kCPU, torch::kBFloat16);
    apply_cpu_matmul(a, CpuMatmul::kAuto);
    for (const torch::jit::Module& m : layer_norms(a))
      EXPECT_EQ(m.attr("float32_on_cpu").toBool(), compat::kBf16LayerNormRoundsPerStep);
    ModelBundle f32 = load_bundle(test::bundle_dir(), torch::kCPU, torch::kFloat);
    apply_cpu_matmul(f32, CpuMatmul::kAuto);
    for (const torch::jit::Module& m : layer_norms(f32)) EXPECT_FALSE(m.attr("float32_on_cpu").toBool());
  }

  torch::jit::Module norm = norms.front();
  torch::manual_seed(11);
  const int64_t width = norm.attr("weight").toTensor().numel();
  const torch::Tensor x = (torch::randn({2, 37, width}) * 3 + 0.5).to(torch::kBFloat16);
  const torch::Tensor w = norm.attr("weight").toTensor(), bias = norm.attr("bias").toTensor();
  const double eps = norm.attr("eps").toDouble();
  norm.setattr("float32_on_cpu", true);
  const torch::Tensor widened = norm.forward({x}).toTensor();
  EXPECT_EQ(widened.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(
      widened,
      torch::layer_norm(x.to(torch::kFloat), {width}, w.to(torch::kFloat), bias.to(torch::kFloat), eps).to(torch::kBFloat16)));
  norm.setattr("float32_on_cpu", false);
  const torch::Tensor native = norm.forward({x}).toTensor();
  EXPECT_TRUE(torch::equal(native, torch::layer_norm(x, {width}, w, bias, eps)));
  const torch::Tensor exact =
      torch::layer_norm(x.to(torch::kDouble), {width}, w.to(torch::kDouble), bias.to(torch::kDouble), eps);
  const double err_widened = (widened.to(torch::kDouble) - exact).abs().mean().item<double>();
  const double err_native = (native.to(torch::kDouble) - exact).abs().mean().item<double>();
  EXPECT_LE(err_widened, err_native * 1.0001);
  // 1.13's bf16 kernel rounds between its steps (measured: a third of the outputs differ); 2.x's
  // rounds once, like the widened norm
  if (!compat::kBf16LayerNormRoundsPerStep) {
    EXPECT_GE(widened.eq(native).to(torch::kFloat).mean().item<double>(), 0.99);
  }

  apply_cpu_matmul(b, CpuMatmul::kNative);
  for (const torch::jit::Module& m : norms) EXPECT_FALSE(m.attr("float32_on_cpu").toBool());
}

TEST(CpuMatmul, WidenedBfloat16SessionKeepsTheBfloat16Logits) {
  auto logits_with = [&](const std::string& dtype, const std::string& mode) {
    return test::prompt_logits(dtype, mode, [&](Session& s) {
      const auto& values = attribute_values(SessionAccess::state(s).bundle);
      ASSERT_FALSE(values.empty());
      const bool widened = dtype == "bfloat16" && mode == "float32";
      EXPECT_EQ(values.front(), widened ? cpu_upcast_min_rows(SessionAccess::state(s).bundle, CpuMatmul::kFloat32) : 0);
    });
  };
  const torch::Tensor exact = logits_with("float32", "auto");
  const torch::Tensor native = logits_with("bfloat16", "native"), widened = logits_with("bfloat16", "float32");
  ASSERT_EQ(exact.sizes(), widened.sizes());
  const double scale = exact.abs().max().item<double>();
  const double err_widened = (widened - exact).abs().max().item<double>() / scale;
  const double err_native = (native - exact).abs().max().item<double>() / scale;
  const auto agree = [&](const torch::Tensor& l) {
    return exact.argmax(-1).eq(l.argmax(-1)).to(torch::kFloat).mean().item<double>();
  };
  std::cout << "bf16 against float32 logits, max error / max |logit|: widened " << err_widened << " (top-1 agreement "
            << agree(widened) << "), native " << err_native << " (" << agree(native) << ")\n";
  // the widened run is the bf16 model computed as bf16 kernels with float32 accumulation compute
  // it: within bf16 rounding of the float32 model, and never worse than LibTorch's own bf16
  // kernels (Debian's LibTorch 1.13 measured 10x worse: its generic bf16 GEMM)
  EXPECT_LT(err_widened, 0.1);
  EXPECT_GE(agree(widened), 0.9);
  EXPECT_LE(err_widened, err_native * 1.5 + 1e-3);
}

TEST(CpuMatmul, SessionRejectsAnUnknownMode) {
  SessionOptions o;
  o.cpu_matmul = "turbo";
  test::expect_invalid_argument([&] { Session::open(test::bundle_dir(), o); }, "cpu_matmul 'turbo'");
}

}  // namespace
}  // namespace era
