// Bundles with int8 decoder weights (export_llava.py --int8 decoder), both schemes: the
// weight-only one (model/int8_linear.h, the default) and the dynamic one (model/int8_weights.h).
// Both give the float bundle's prompt logits within the int8 error and mostly its greedy tokens
// (the accuracy cost, printed); weight-only quantises no activations, so its error is the smaller.
// Dynamic bundles load on the CPU with an engine chosen and every int8 linear configured for it,
// and are refused on a GPU with the field named (weight-only ones are not). Where the engine keeps
// the int8 weights beside its packed copies (oneDNN), they load under QNNPACK and are packed one
// at a time, and the kept copies are freed, without changing any product.
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <ATen/native/quantized/PackedParams.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "era/debug.h"
#include "era/era.h"
#include "kernels/cpu_gemv.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "model/int8_test_util.h"
#include "model/int8_weights.h"
#include "pipeline/session_internals.h"
#include "test_support.h"
#include "util/compat.h"

namespace era {
namespace {

using test::decoder_int8_weight_bytes;
using test::int8_bundle_dir;
using test::int8_dynamic_bundle_dir;

// Linears of either scheme: a packed LibTorch weight (dynamic) or int8 weight + scales.
int count_int8_linears(const torch::jit::Module& top) {
  int n = 0;
  for (const torch::jit::Module m : top.modules()) n += m.hasattr("_packed") || m.hasattr("scales") ? 1 : 0;
  return n;
}

TEST(Int8Weights, ManifestNamesTheScopeAndSchemeAndEveryDecoderLinearIsInt8) {
  for (const auto& [dir, scheme] :
       {std::pair{int8_bundle_dir(), "weight-only"}, std::pair{int8_dynamic_bundle_dir(), "dynamic"}}) {
    SCOPED_TRACE(scheme);
    ModelBundle b = load_bundle(dir, torch::kCPU);
    EXPECT_EQ(b.manifest.int8_weights, "decoder");
    EXPECT_EQ(b.manifest.int8_scheme, scheme);
    // q/k/v/o and gate/up/down per layer, and lm_head; the vision tower and projector stay float
    EXPECT_EQ(count_int8_linears(b.decoder), 7 * b.manifest.text.num_layers + 1);
    EXPECT_EQ(count_int8_linears(b.vision), 0);
    EXPECT_EQ(count_int8_linears(b.projector), 0);
    // only the dynamic scheme's linears have an activation range to set
    EXPECT_EQ(configure_int8_modules(b), std::string(scheme) == "dynamic" ? 7 * b.manifest.text.num_layers + 1 : 0);
  }
  EXPECT_NE(int8_engine_name(), "NoQEngine");
  ModelBundle f = load_bundle(test::bundle_dir(), torch::kCPU);
  EXPECT_EQ(f.manifest.int8_weights, "");
  EXPECT_EQ(f.manifest.int8_scheme, "");
  EXPECT_EQ(configure_int8_modules(f), 0);
}

TEST(Int8Weights, PromptLogitsAndGreedyTokensStayCloseToTheFloatBundle) {
  Request r;
  r.images = {test::source_dir() + "/tests/data/sample.png"};
  r.prompt = "Describe the image.";
  r.reduction.method = "era";
  r.reduction.tokens = 32;
  Session f = Session::open(test::bundle_dir());
  const torch::Tensor lf = debug::prompt(f, r).logits;
  std::vector<double> errors;
  for (const auto& [dir, scheme] :
       {std::pair{int8_bundle_dir(), "weight-only"}, std::pair{int8_dynamic_bundle_dir(), "dynamic"}}) {
    SCOPED_TRACE(scheme);
    Session q = Session::open(dir);
    const torch::Tensor lq = debug::prompt(q, r).logits;
    ASSERT_EQ(lf.sizes(), lq.sizes());
    const double rel = ((lq - lf).abs().max() / lf.abs().max()).item<double>();
    const double agree = lf.argmax(-1).eq(lq.argmax(-1)).to(torch::kFloat).mean().item<double>();
    std::cout << "int8 decoder (" << scheme << ") vs float32, " << lf.size(0)
              << " prompt positions: max |logit error| / max |logit| = " << rel << ", greedy agreement " << agree << " (engine "
              << int8_engine_name() << ")\n";
    EXPECT_GT(rel, 0.0);   // the weights really are quantised
    EXPECT_LT(rel, 0.15);  // measured 0.074 (dynamic, x86 engine); a wrong scale or layout gives ~1
    EXPECT_GE(agree, 0.85);
    errors.push_back(rel);
    // and generation runs end to end with the same length
    Request g = r;
    g.max_new_tokens = 6;
    g.stop_at_eos = false;
    EXPECT_EQ(f.generate(g).tokens.size(), q.generate(g).tokens.size());
  }
  // the weights' rounding alone against the weights' and the activations' rounding
  EXPECT_LT(errors[0], errors[1]) << "weight-only int8 was less accurate than dynamic int8";
}

TEST(Int8Weights, AWeightOnlyBundleNeedsNoEngineAndNoCpu) {
  Manifest m;
  m.int8_weights = "decoder";
  m.int8_scheme = "weight-only";
  const Int8LoadPlan plan = prepare_int8_load(m, "some/bundle", torch::Device(torch::kCUDA, 0));
  EXPECT_FALSE(plan.int8);  // nothing for an engine to do
}

bool engine_supported(at::QEngine engine) {
  const auto& supported = at::globalContext().supportedQEngines();
  return std::find(supported.begin(), supported.end(), engine) != supported.end();
}

// The dynamic int8 bundle's decoder, its linears packed for `engine` as they load; the process's engine
// is restored afterwards.
torch::jit::Module load_int8_decoder(at::QEngine engine) {
  register_era_operators();
  const at::QEngine before = at::globalContext().qEngine();
  at::globalContext().setQEngine(engine);
  torch::jit::Module m = torch::jit::load(int8_dynamic_bundle_dir() + "/decoder.pt");
  at::globalContext().setQEngine(before);
  m.eval();
  return m;
}

// Each int8 linear of `a` and `b` gives the same output, bit for bit, on the same input (with
// b's activation range: a freshly loaded reference has the export's).
void expect_same_products(const torch::jit::Module& a, const torch::jit::Module& b) {
  const auto la = int8_linears(a), lb = int8_linears(b);
  ASSERT_EQ(la.size(), lb.size());
  ASSERT_FALSE(la.empty());
  torch::manual_seed(7);
  for (size_t i = 0; i < la.size(); ++i) {
    torch::jit::Module ma = la[i], mb = lb[i];
    ma.setattr("reduce_range", mb.attr("reduce_range"));
    for (int64_t rows : {1, 5}) {  // a decode step and a prefill-sized product
      const torch::Tensor x = torch::randn({rows, ma.attr("in_features").toInt()});
      EXPECT_TRUE(torch::equal(ma.forward({x}).toTensor(), mb.forward({x}).toTensor()))
          << "linear " << i << ", " << rows << " rows";
    }
  }
}

TEST(Int8Weights, TheOnednnEngineLetsGoOfTheInt8WeightsItPackedFrom) {
  if (!engine_supported(at::QEngine::ONEDNN)) GTEST_SKIP() << "this LibTorch has no oneDNN quantisation engine";
  torch::jit::Module kept = load_int8_decoder(at::QEngine::ONEDNN), released = load_int8_decoder(at::QEngine::ONEDNN);
  int64_t weight_bytes = 0;
  for (const torch::jit::Module& m : int8_linears(released)) {
    weight_bytes += m.attr("out_features").toInt() * m.attr("in_features").toInt();
    // before: oneDNN hands back the one int8 tensor it keeps, not a fresh one
    const auto packed = m.attr("_packed").toCustomClass<LinearPackedParamsBase>();
    EXPECT_EQ(std::get<0>(packed->unpack()).unsafeGetTensorImpl(), std::get<0>(packed->unpack()).unsafeGetTensorImpl());
  }
  EXPECT_EQ(release_int8_weight_sources(released), weight_bytes);  // one byte per weight
  EXPECT_EQ(release_int8_weight_sources(released), 0);             // nothing is freed twice
  for (const torch::jit::Module& m : int8_linears(released)) {
    const torch::Tensor w = std::get<0>(m.attr("_packed").toCustomClass<LinearPackedParamsBase>()->unpack());
    EXPECT_EQ(w.size(0), 0);  // an empty weight, never a dangling one
    EXPECT_EQ(w.storage().nbytes(), 0u);
  }
  expect_same_products(kept, released);
}

TEST(Int8Weights, EnginesThatKeepNoSecondCopyOrStillNeedItAreLeftAlone) {
  // x86 / fbgemm rebuild the weight on each unpack(); QNNPACK packs on first use from the one it
  // keeps (freeing it would break the first product).
  int engines = 0;
  for (at::QEngine engine : {at::QEngine::X86, at::QEngine::FBGEMM, at::QEngine::QNNPACK}) {
    if (!engine_supported(engine)) continue;
    SCOPED_TRACE(c10::toString(engine));
    ++engines;
    torch::jit::Module kept = load_int8_decoder(engine), untouched = load_int8_decoder(engine);
    EXPECT_EQ(release_int8_weight_sources(untouched), 0);
    expect_same_products(kept, untouched);
  }
  if (engines == 0) GTEST_SKIP() << "no x86, fbgemm or qnnpack engine in this LibTorch";
}

TEST(Int8Weights, LoadsForTheFastestEngineKeepingOneCopyOfEachWeight) {
  ModelBundle b = load_bundle(int8_dynamic_bundle_dir(), torch::kCPU);
  const at::QEngine run = at::globalContext().qEngine();
  const bool onednn = run == at::QEngine::ONEDNN;
  // the fastest engine there is: x86 on LibTorch 2.x, oneDNN on Debian's 1.13 (no fbgemm)
  EXPECT_TRUE(run == compat::quantized_engines_by_preference().front() || (onednn && !engine_supported(at::QEngine::FBGEMM)))
      << c10::toString(run);
  for (const torch::jit::Module& m : int8_linears(b.decoder)) {
    if (onednn) {
      EXPECT_EQ(int8_packed_class(m), "PackedLinearWeightsOnednn");
    }  // loaded under QNNPACK, packed anew
  }
  EXPECT_EQ(b.int8_sources_freed, onednn ? decoder_int8_weight_bytes(b.manifest) : 0);
  expect_same_products(load_int8_decoder(run), b.decoder);
}

TEST(Int8Weights, ALazyQnnpackLoadIsPackedForOnednnWithTheSameProducts) {
  // The Debian route's plan, on any LibTorch that has both engines.
  if (!engine_supported(at::QEngine::ONEDNN) || !engine_supported(at::QEngine::QNNPACK)) {
    GTEST_SKIP() << "this LibTorch lacks the oneDNN or the QNNPACK quantisation engine";
  }
  ModelBundle b = load_bundle(int8_dynamic_bundle_dir(), torch::kCPU);
  const at::QEngine before = at::globalContext().qEngine();
  b.decoder = load_int8_decoder(at::QEngine::QNNPACK);
  for (const torch::jit::Module& m : int8_linears(b.decoder)) EXPECT_EQ(int8_packed_class(m), "PackedLinearWeightsQnnp");
  Int8LoadPlan plan;
  plan.int8 = true;
  plan.run = at::QEngine::ONEDNN;
  plan.load = at::QEngine::QNNPACK;
  EXPECT_EQ(finish_int8_load(b, plan), decoder_int8_weight_bytes(b.manifest));
  EXPECT_EQ(at::globalContext().qEngine(), at::QEngine::ONEDNN);
  for (const torch::jit::Module& m : int8_linears(b.decoder)) {
    EXPECT_EQ(int8_packed_class(m), "PackedLinearWeightsOnednn");
    EXPECT_EQ(std::get<1>(m.attr("_packed").toCustomClass<LinearPackedParamsBase>()->unpack()), c10::nullopt)
        << "QNNPACK's zero bias for a linear without one was carried over";
    EXPECT_FALSE(m.attr("reduce_range").toBool() && (cpu_has_flag("avx512_vnni") || cpu_has_flag("avx_vnni")));
  }
  expect_same_products(load_int8_decoder(at::QEngine::ONEDNN), b.decoder);
  at::globalContext().setQEngine(before);
}

TEST(Int8Weights, AGpuDeviceIsRefusedNamingTheField) {
  Manifest m;
  m.int8_weights = "decoder";
  m.int8_scheme = "dynamic";
  try {
    prepare_int8_load(m, "some/bundle", torch::Device(torch::kCUDA, 0));
    FAIL() << "a CUDA device was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("quantization.int8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CPU only"), std::string::npos) << e.what();
  }
  m.int8_weights = "";
  EXPECT_NO_THROW(prepare_int8_load(m, "some/bundle", torch::Device(torch::kCUDA, 0)));  // nothing int8
}

}  // namespace
}  // namespace era
