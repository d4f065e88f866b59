// Bundles with int8 decoder weights (export_llava.py --int8 decoder, model/int8_weights.h): they
// load on the CPU with an engine chosen and every int8 linear configured for it, give the float
// bundle's prompt logits within the int8 error and mostly its greedy tokens (the accuracy cost,
// printed), and are refused on a GPU with the field named.
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <iostream>

#include "era/debug.h"
#include "era/era.h"
#include "model/bundle.h"
#include "model/int8_weights.h"
#include "pipeline/session_internals.h"
#include "test_support.h"

namespace era {
namespace {

std::string int8_bundle_dir() { return test::testdata_dir() + "/bundle-int8"; }

int count_int8_linears(const torch::jit::Module& top) {
  int n = 0;
  for (const torch::jit::Module m : top.modules()) n += m.hasattr("_packed") ? 1 : 0;
  return n;
}

TEST(Int8Weights, ManifestNamesTheScopeAndEveryDecoderLinearIsInt8) {
  ModelBundle b = load_bundle(int8_bundle_dir(), torch::kCPU);
  EXPECT_EQ(b.manifest.int8_weights, "decoder");
  // q/k/v/o and gate/up/down per layer, and lm_head; the vision tower and projector stay float
  EXPECT_EQ(count_int8_linears(b.decoder), 7 * b.manifest.text.num_layers + 1);
  EXPECT_EQ(count_int8_linears(b.vision), 0);
  EXPECT_EQ(count_int8_linears(b.projector), 0);
  EXPECT_EQ(configure_int8_modules(b), 7 * b.manifest.text.num_layers + 1);
  EXPECT_NE(int8_engine_name(), "NoQEngine");
  ModelBundle f = load_bundle(test::bundle_dir(), torch::kCPU);
  EXPECT_EQ(f.manifest.int8_weights, "");
  EXPECT_EQ(configure_int8_modules(f), 0);
}

TEST(Int8Weights, PromptLogitsAndGreedyTokensStayCloseToTheFloatBundle) {
  Request r;
  r.images = {test::source_dir() + "/tests/data/sample.png"};
  r.prompt = "Describe the image.";
  r.reduction.method = "era";
  r.reduction.tokens = 32;
  Session f = Session::open(test::bundle_dir());
  Session q = Session::open(int8_bundle_dir());
  const torch::Tensor lf = debug::prompt(f, r).logits, lq = debug::prompt(q, r).logits;
  ASSERT_EQ(lf.sizes(), lq.sizes());
  const double rel = ((lq - lf).abs().max() / lf.abs().max()).item<double>();
  const double agree = lf.argmax(-1).eq(lq.argmax(-1)).to(torch::kFloat).mean().item<double>();
  std::cout << "int8 decoder vs float32, " << lf.size(0) << " prompt positions: max |logit error| / max |logit| = " << rel
            << ", greedy agreement " << agree << " (engine " << int8_engine_name() << ")\n";
  EXPECT_GT(rel, 0.0);  // the weights really are quantised
  EXPECT_LT(rel, 0.15);  // measured 0.074 (x86 engine); a wrong scale or layout gives ~1
  EXPECT_GE(agree, 0.85);
  // and generation runs end to end with the same length
  r.max_new_tokens = 6;
  r.stop_at_eos = false;
  const Result a = f.generate(r), b = q.generate(r);
  EXPECT_EQ(a.tokens.size(), b.tokens.size());
}

TEST(Int8Weights, AGpuDeviceIsRefusedNamingTheField) {
  Manifest m;
  m.int8_weights = "decoder";
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
