// The method registry end to end: every entry the registry lists runs through Session::generate on
// every family (LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision), and does what its entry says: the
// unreduced one keeps every token, the others keep fewer, only the ERA entries send LAR biases,
// in-decoder methods keep every token before the decoder and report what layers >= K saw. On
// OneVision (SigLIP, no CLS token) VisionZip refuses by name instead.
#include <gtest/gtest.h>

#include "era/era.h"
#include "test_support.h"

namespace era {
namespace {

Session& session_for(const std::string& arch) {
  static Session v15 = Session::open(test::bundle_dir());
  static Session next = Session::open(test::next_bundle_dir());
  if (arch == "llava-onevision") {
    static Session onevision = Session::open(test::onevision_bundle_dir());
    return onevision;
  }
  return arch == "llava-1.5" ? v15 : next;
}

class EveryMethod : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(EveryMethod, RunsEndToEndAsItsEntrySays) {
  const auto& [arch, name] = GetParam();
  const MethodInfo method = method_info(name);
  Session& session = session_for(arch);
  const ModelInfo info = session.info();
  ASSERT_EQ(info.arch, arch);

  Request r;
  r.images = {test::source_dir() + "/tests/data/sample.png"};
  r.prompt = "What is shown in this image?";
  r.max_new_tokens = 4;
  r.stop_at_eos = false;
  r.reduction.method = name;
  r.reduction.tokens = arch == "llava-1.5" ? 64 : 160;
  if (arch == "llava-onevision" && name == "visionzip") {
    test::expect_invalid_argument([&] { session.generate(r); }, "'visionzip' ranks tokens by the vision tower's CLS token");
    return;
  }
  // The tiny decoders have 2 layers: prune after layer 1.
  r.reduction.baselines.fastv_layer = r.reduction.baselines.dart_layer = 1;
  const Result full = session.generate([&] {
    Request u = r;
    u.reduction.method = kUnreducedMethod;
    return u;
  }());
  const Result out = session.generate(r);

  EXPECT_EQ(out.tokens.size(), 4u) << name;
  ASSERT_EQ(out.reductions.size(), 1u);
  EXPECT_EQ(out.reductions[0].method, name);
  bool any_bias = false;
  for (const float b : out.reductions[0].bias) any_bias = any_bias || b != 1.0f;
  switch (method.stage) {
    case MethodStage::kNone:
      EXPECT_EQ(out.stats.visual_tokens, full.stats.visual_tokens);
      EXPECT_EQ(out.tokens, full.tokens);
      break;
    case MethodStage::kBeforeDecoder:
      EXPECT_LT(out.stats.visual_tokens, full.stats.visual_tokens) << name;
      EXPECT_EQ(out.stats.visual_tokens_early_layers, out.stats.visual_tokens) << name;
      if (arch == "llava-1.5") {
        EXPECT_EQ(out.stats.visual_tokens, 64) << name;
      }
      break;
    case MethodStage::kInDecoder:
      EXPECT_EQ(out.stats.visual_tokens_early_layers, full.stats.visual_tokens) << name;
      EXPECT_LT(out.stats.visual_tokens, full.stats.visual_tokens) << name;
      break;
  }
  // Only methods that rectify attention send b_k != 1 (ERA with recycling always merges some).
  if (!method.rectifies_attention) {
    EXPECT_FALSE(any_bias) << name;
  }
  if (name == "era") {
    EXPECT_TRUE(any_bias);
  }
}

std::vector<std::tuple<std::string, std::string>> every_pair() {
  std::vector<std::tuple<std::string, std::string>> pairs;
  for (const std::string arch : {"llava-1.5", "llava-next", "llava-onevision"}) {
    for (const MethodInfo& m : available_methods()) pairs.emplace_back(arch, m.name);
  }
  return pairs;
}

std::string label(const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& info) {
  std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryMethod, ::testing::ValuesIn(every_pair()), label);

// Unknown methods are refused whether or not the request has images, by the same check that
// batch tools call up front.
TEST(RequestValidation, UnknownMethodIsRefusedWithOrWithoutImages) {
  Request r;
  r.prompt = "Hello";
  r.max_new_tokens = 2;
  r.reduction.method = "erra";
  for (const bool with_image : {false, true}) {
    if (with_image) r.images = {test::source_dir() + "/tests/data/sample.png"};
    test::expect_invalid_argument([&] { session_for("llava-1.5").generate(r); }, "unknown reduction method 'erra'");
    test::expect_invalid_argument([&] { validate_request(r); }, "available: full, era");
  }
  r.reduction.method = "era";
  r.reduction.tokens = 64;
  r.reduction.scope = "everything";
  test::expect_invalid_argument([&] { validate_request(r); }, "budget scope");
  r.reduction.scope = "crop";
  r.reduction.baselines.fastv_layer = 0;
  test::expect_invalid_argument([&] { validate_request(r); }, "fastv_layer");
  r.reduction.baselines.fastv_layer = 2;
  r.reduction.era.lambda = 2.0f;
  test::expect_invalid_argument([&] { validate_request(r); }, "lambda");
}

}  // namespace
}  // namespace era
