// The C++ pipeline against the exporter's eager PyTorch model (tests/python/make_logit_refs.py):
// vision outputs, projector, prefill logits, LAR-biased logits and 32 greedy steps; plus the
// KV cache against no-cache recomputation and the augmented-key attention against its formula.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "model/bundle.h"
#include "model/decoder.h"
#include "model/vision_encoder.h"
#include "parity_support.h"
#include "reduce/reducer.h"
#include "runtime/generator.h"
#include "runtime/sequence.h"
#include "test_support.h"
#include "util/compat.h"
#include "util/npy.h"

namespace era {
namespace {

std::string ref(const std::string& name) { return test::testdata_dir() + "/logits/" + name; }

using test::max_rel_error;

class DecoderParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bundle_ = new ModelBundle(load_bundle(test::bundle_dir(), torch::kCPU));
    std::ifstream in(ref("input_ids.json"));
    const auto j = nlohmann::json::parse(in);
    ids_ = new std::vector<int64_t>(j["ids"].get<std::vector<int64_t>>());
    image_token_id_ = j["image_token_id"];
  }
  static void TearDownTestSuite() {
    delete bundle_;
    delete ids_;
  }

  // The prompt sequence built by the C++ pipeline from the reference pixels and ids.
  PromptSequence sequence(VisionOutput* vision_out = nullptr) {
    VisionEncoder vision(*bundle_);
    const auto v = vision.encode(read_npy(ref("pixel_values.npy")));
    if (vision_out) *vision_out = v;
    Decoder dec(*bundle_);
    ReductionInput input;
    input.embeddings = v.embeddings[0];
    return build_sequence(dec, *ids_, image_token_id_, -1, {FullReducer().reduce(input)});
  }

  static ModelBundle* bundle_;
  static std::vector<int64_t>* ids_;
  static int64_t image_token_id_;
  c10::InferenceMode inference_;
};
ModelBundle* DecoderParity::bundle_ = nullptr;
std::vector<int64_t>* DecoderParity::ids_ = nullptr;
int64_t DecoderParity::image_token_id_ = -1;

TEST_F(DecoderParity, VisionAndProjectorMatchEager) {
  VisionOutput v;
  sequence(&v);
  EXPECT_LE(max_rel_error(v.features[0], read_npy(ref("vision_features.npy"))), 1e-4);
  EXPECT_LE(max_rel_error(v.cls_logits[0], read_npy(ref("attn_logits.npy"))), 1e-4);
  EXPECT_LE(max_rel_error(v.cls_probs[0], read_npy(ref("attn_probs.npy"))), 1e-4);
  EXPECT_LE(max_rel_error(v.mean_logits[0], read_npy(ref("mean_logits.npy"))), 1e-4);
  EXPECT_LE(max_rel_error(v.mean_probs[0], read_npy(ref("mean_probs.npy"))), 1e-4);
  EXPECT_LE(max_rel_error(v.embeddings[0], read_npy(ref("projected.npy"))), 1e-4);
  // Probabilities of the full CLS row sum to one with the CLS column: without it, below one.
  EXPECT_TRUE((v.cls_probs.sum(-1) < 1.0 + 1e-5).all().item<bool>());
}

TEST_F(DecoderParity, PrefillLogitsMatchEager) {
  const auto seq = sequence();
  EXPECT_EQ(seq.visual_tokens(), bundle_->manifest.vision.num_patches);
  Decoder dec(*bundle_);
  auto cache = dec.make_cache(1, seq.length());
  const auto logits = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache, /*last_only=*/false);
  const auto want = read_npy(ref("logits.npy"));
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{1, want.size(0), want.size(1)}));
  const double err = max_rel_error(logits[0], want);
  std::cout << "[ measured ] prefill logits max relative error vs eager: " << err << "\n";
  EXPECT_LE(err, 1e-4);
}

TEST_F(DecoderParity, BiasedLogitsMatchExplicitFormula) {
  auto seq = sequence();
  seq.key_log_bias = read_npy(ref("log_bias.npy")).to(torch::kFloat).unsqueeze(0);
  Decoder dec(*bundle_);
  auto cache = dec.make_cache(1, seq.length());
  const auto logits = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache, false);
  const auto want = read_npy(ref("logits_biased.npy"));
  EXPECT_LE(max_rel_error(logits[0], want), 1e-4);
  // The bias must matter: the unbiased reference differs clearly.
  EXPECT_GT(max_rel_error(logits[0], read_npy(ref("logits.npy"))), 1e-3);
}

TEST_F(DecoderParity, Greedy32StepsMatchEager) {
  const auto seq = sequence();
  Decoder dec(*bundle_);
  auto cache = dec.make_cache(1, seq.length() + 32);
  Sampler greedy({});
  Generator gen(dec, *bundle_->tokenizer, bundle_->manifest.tokens.stop_ids);
  const auto out = gen.run(seq, {32, /*stop_at_eos=*/false}, greedy, cache);
  std::ifstream in(ref("greedy.json"));
  const auto want = nlohmann::json::parse(in)["tokens"].get<std::vector<int64_t>>();
  EXPECT_EQ(out.tokens, want);
  EXPECT_EQ(out.decode_ms.size(), 31u);
}

TEST_F(DecoderParity, CachedDecodeEqualsRecomputation) {
  auto seq = sequence();
  // A non-zero bias on the image keys checks that the cached keys keep their LAR channel.
  seq.key_log_bias = read_npy(ref("log_bias.npy")).to(torch::kFloat).unsqueeze(0);
  Decoder dec(*bundle_);
  const int64_t steps = 8;
  auto cache = dec.make_cache(1, seq.length() + steps);
  auto logits = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache, true);
  std::vector<int64_t> generated;
  for (int64_t s = 0; s < steps; ++s) {
    generated.push_back(logits[0][-1].argmax().item<int64_t>());
    const auto embed = dec.embed(torch::tensor({generated.back()}, torch::kLong).unsqueeze(0));
    logits = dec.forward(embed, torch::full({1, 1}, seq.length() + s, torch::kLong), torch::zeros({1, 1}), cache, true);

    // The same prefix recomputed from scratch, with no cache reuse.
    const auto gen_embeds = dec.embed(torch::tensor(generated, torch::kLong).unsqueeze(0));
    const auto all = torch::cat({seq.embeds, gen_embeds}, 1);
    const int64_t n = all.size(1);
    auto fresh = dec.make_cache(1, n);
    const auto bias = torch::cat({seq.key_log_bias, torch::zeros({1, s + 1})}, 1);
    const auto want = dec.forward(all, torch::arange(n, torch::kLong).unsqueeze(0), bias, fresh, true);
    EXPECT_LE(max_rel_error(logits[0][-1], want[0][-1]), 1e-5) << "step " << s;
  }
}

TEST_F(DecoderParity, EarlyLayerScheduleMatchesExplicitFormula) {
  auto seq = sequence();
  seq.key_log_bias = read_npy(ref("log_bias.npy")).to(torch::kFloat).unsqueeze(0);
  Decoder dec(*bundle_);
  LarSettings lar;
  lar.layer_scale.assign(static_cast<size_t>(bundle_->manifest.text.num_layers), 0.0f);
  lar.layer_scale[0] = 1.0f;  // bias in layer 0 only
  auto cache = dec.make_cache(1, seq.length());
  const auto logits = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache, false, lar);
  EXPECT_LE(max_rel_error(logits[0], read_npy(ref("logits_biased_early.npy"))), 1e-4);
}

// The augmented-key path and the additive-mask path give the same logits, in prefill and in
// decode steps whose queries see the image keys' bias only through the cache.
TEST_F(DecoderParity, AugmentedAndMaskPathsAgree) {
  auto seq = sequence();
  seq.key_log_bias = read_npy(ref("log_bias.npy")).to(torch::kFloat).unsqueeze(0);
  Decoder dec(*bundle_);
  LarSettings aug, mask;
  for (int64_t l = 0; l < bundle_->manifest.text.num_layers; ++l) aug.layer_scale.push_back(1.0f - 0.3f * l);
  mask.layer_scale = aug.layer_scale;
  mask.path = LarPath::kAdditiveMask;
  const int64_t steps = 4;
  auto cache_a = dec.make_cache(1, seq.length() + steps), cache_m = dec.make_cache(1, seq.length() + steps);
  auto la = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache_a, false, aug);
  auto lm = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache_m, false, mask);
  EXPECT_LE(max_rel_error(lm, la), 1e-5) << "prefill";
  for (int64_t s = 0; s < steps; ++s) {
    const auto next = la[0][-1].argmax().item<int64_t>();
    const auto embed = dec.embed(torch::full({1, 1}, next, torch::kLong));
    const auto pos = torch::full({1, 1}, seq.length() + s, torch::kLong);
    la = dec.forward(embed, pos, torch::zeros({1, 1}), cache_a, true, aug);
    lm = dec.forward(embed, pos, torch::zeros({1, 1}), cache_m, true, mask);
    EXPECT_LE(max_rel_error(lm, la), 1e-5) << "decode step " << s;
  }
}

// LAR switched off (every layer's scale 0) is the unrectified model exactly, whatever the bias.
TEST_F(DecoderParity, ZeroScaleIsExactlyTheUnrectifiedModel) {
  auto seq = sequence();
  Decoder dec(*bundle_);
  auto c1 = dec.make_cache(1, seq.length()), c2 = dec.make_cache(1, seq.length());
  const auto plain = dec.forward(seq.embeds, seq.positions, torch::zeros({1, seq.length()}), c1, false);
  LarSettings off;
  off.layer_scale.assign(static_cast<size_t>(bundle_->manifest.text.num_layers), 0.0f);
  const auto biased_off =
      dec.forward(seq.embeds, seq.positions, read_npy(ref("log_bias.npy")).to(torch::kFloat).unsqueeze(0), c2, false, off);
  EXPECT_TRUE(torch::equal(plain, biased_off));
  EXPECT_TRUE(torch::equal(c1.keys(), c2.keys()));
}

TEST_F(DecoderParity, AttentionCaptureMatchesForward) {
  auto seq = sequence();
  seq.key_log_bias = read_npy(ref("log_bias.npy")).to(torch::kFloat).unsqueeze(0);
  Decoder dec(*bundle_);
  auto c1 = dec.make_cache(1, seq.length()), c2 = dec.make_cache(1, seq.length());
  const auto plain = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, c1, true);
  const auto [logits, attn] = dec.forward_with_attention(seq.embeds, seq.positions, seq.key_log_bias, c2);
  EXPECT_LE(max_rel_error(logits, plain), 1e-6);
  const auto& t = bundle_->manifest.text;
  ASSERT_EQ(attn.sizes(), (std::vector<int64_t>{t.num_layers, 1, t.num_heads, seq.length()}));
}

// softmax(q k^T / sqrt(d) + bias[key] + causal) v, written out.
torch::Tensor explicit_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 const torch::Tensor& bias, int64_t causal_offset) {
  const int64_t tq = q.size(2), tk = k.size(2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  scores = scores + bias.view({bias.size(0), 1, 1, tk});
  const auto qi = torch::arange(tq).view({tq, 1}) + causal_offset;
  const auto kj = torch::arange(tk).view({1, tk});
  scores = scores.masked_fill(kj > qi, -std::numeric_limits<float>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

TEST_F(DecoderParity, AugmentedAttentionEqualsFormula) {
  torch::manual_seed(7);
  auto attend = bundle_->decoder.get_method("attend");
  const int64_t d = bundle_->manifest.text.head_dim;
  for (const auto& [tq, tk] : std::vector<std::pair<int64_t, int64_t>>{{9, 9}, {1, 12}, {4, 10}}) {
    const auto q = torch::randn({1, 4, tq, d}), k = torch::randn({1, 4, tk, d}), v = torch::randn({1, 4, tk, d});
    const int64_t offset = tk - tq;
    const auto zero = torch::zeros({1, tk});
    const auto bias = torch::rand({1, tk}) * std::log(6.0);
    const auto plain = attend({q, k, v, zero, offset}).toTensor();
    // Zero bias: plain causal attention (the fused SDPA on LibTorch 2.x, the math formula on 1.13).
    const auto mask =
        torch::zeros({tq, tk}).masked_fill(torch::arange(tk).view({1, tk}) > torch::arange(tq).view({tq, 1}) + offset, -INFINITY);
    EXPECT_LE(
        (plain - compat::scaled_dot_product_attention(q, k, v, mask, 1.0 / std::sqrt(double(d)))).abs().max().item<double>(),
        1e-5);
    // Random bias: the explicit softmax(QK^T/sqrt(d) + B)V.
    const auto rectified = attend({q, k, v, bias, offset}).toTensor();
    EXPECT_LE((rectified - explicit_attention(q, k, v, bias, offset)).abs().max().item<double>(), 1e-5);
    EXPECT_GT((rectified - plain).abs().max().item<double>(), 1e-3);
  }
}

}  // namespace
}  // namespace era
