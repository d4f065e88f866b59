// In-decoder pruning (FastV, DART): the selections on constructed signals (hand-computed
// answers), and the pruned KV-cache prefill + decode against the eager "mask implementation"
// (tests/python/make_pruning_refs.py: independent selection, dropped keys masked from layer K
// on, full recompute every step).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/bundle.h"
#include "model/decoder.h"
#include "model/vision_encoder.h"
#include "parity_support.h"
#include "reduce/dart.h"
#include "reduce/fastv.h"
#include "reduce/reducer.h"
#include "reduce/registry.h"
#include "runtime/in_decoder_pruning.h"
#include "runtime/sequence.h"
#include "test_support.h"
#include "util/npy.h"

namespace era {
namespace {

using Positions = std::vector<int64_t>;

// ---- FastV selection --------------------------------------------------------------------------

TEST(FastvSelect, KeepsTheMostAttendedImageTokensFirstIndexOnTies) {
  // One head; keys 0..9, image span 3..7. Tokens 4 and 6 tie for the most attention.
  const auto logits = torch::tensor({0.f, 0.f, 0.f, 1.f, 5.f, 2.f, 5.f, 3.f, 9.f, 9.f}).unsqueeze(0);
  EXPECT_EQ(fastv_select(logits, {3, 5, 1}), (Positions{4}));  // tie: the first index
  EXPECT_EQ(fastv_select(logits, {3, 5, 2}), (Positions{4, 6}));
  EXPECT_EQ(fastv_select(logits, {3, 5, 3}), (Positions{4, 6, 7}));        // ascending, not by score
  EXPECT_EQ(fastv_select(logits, {3, 5, 0}), (Positions{3, 4, 5, 6, 7}));  // 0 = keep all
  EXPECT_EQ(fastv_select(logits, {3, 5, 9}), (Positions{3, 4, 5, 6, 7}));
}

TEST(FastvSelect, AveragesProbabilitiesOverHeadsNotLogits) {
  // Image span 1..3, text key 4. Head 0 puts its mass on 1, head 1 on the text key: by mean
  // probability token 1 wins, by mean logit token 2 (15 vs 10) would.
  const auto logits = torch::tensor({{0.f, 20.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 30.f, 0.f, 60.f}});
  EXPECT_EQ(fastv_select(logits, {1, 3, 1}), (Positions{1}));
}

TEST(FastvSelect, SoftmaxNormalisesOverEveryKey) {
  // Head 0 favours image token 1 but spends nearly all its mass on text key 4; head 1 mildly
  // favours token 2. Over all keys token 2 gets more attention; a softmax over the image span
  // alone would pick token 1.
  const auto logits = torch::tensor({{0.f, 5.f, 0.f, 0.f, 100.f}, {0.f, 0.f, 1.f, 0.f, 0.f}});
  EXPECT_EQ(fastv_select(logits, {1, 3, 1}), (Positions{2}));
}

// ---- DART selection ---------------------------------------------------------------------------

// 12 tokens: image span 2..7, text after 8..11. Keys give the L1 norms; hidden states are 2-d unit
// vectors at the given angles, so the cosines are known.
struct DartCase {
  torch::Tensor keys, hidden;
  ImageSpan span{2, 6, 4};
  Positions text_after{8, 9, 10, 11};
  DartCase() {
    const std::vector<float> l1 = {1, 1, 2, 3, 1, 10, 4, 2, 1, 9, 3, 1};
    const std::vector<float> degrees = {0, 0, 0, 90, 180, 10, 170, 45, 0, 180, 0, 0};
    keys = torch::zeros({12, 4});
    hidden = torch::zeros({12, 2});
    for (int i = 0; i < 12; ++i) {
      keys[i][0] = -l1[i] / 2;  // the sign must not matter
      keys[i][3] = l1[i] / 2;
      hidden[i][0] = 3.0 * std::cos(degrees[i] * M_PI / 180);  // the scale must not matter
      hidden[i][1] = 3.0 * std::sin(degrees[i] * M_PI / 180);
    }
  }
};

TEST(DartSelect, PivotsByKeyNormClaimTheLeastSimilarTokens) {
  const DartCase c;
  DartParams p;
  p.image_pivots = 1;
  p.text_pivots = 1;
  // Pivots: image 5 (L1 10), text 9 (L1 9). Budget 4 -> each claims floor(4 / 2) = 2.
  // Pivot 5 (10 deg): least similar are 4 (180) and 6 (170). Pivot 9 (180 deg), from {2, 3, 7}:
  // 2 (0 deg, cos -1) and 7 (45 deg). Kept: the image pivot and the picks (official count 5).
  EXPECT_EQ(dart_select(c.keys, c.hidden, c.span, c.text_after, p), (Positions{2, 4, 5, 6, 7}));
  // Exact budget: 3 picks over 2 pivots -> 2 + 1.
  p.exact_budget = true;
  EXPECT_EQ(dart_select(c.keys, c.hidden, c.span, c.text_after, p), (Positions{2, 4, 5, 6}));
}

TEST(DartSelect, OfficialCountIsPivotsPlusEightTimesFloorOfBudgetOverEight) {
  const int64_t n = 576, L = n + 20;
  const auto keys = torch::randn({L, 16}, torch::TensorOptions().dtype(torch::kFloat));
  const auto hidden = torch::randn({L, 8});
  Positions text;
  for (int64_t p = 10 + n; p < L; ++p) text.push_back(p);
  DartParams official, exact;
  exact.exact_budget = true;
  for (const int64_t budget : {64, 128, 61, 192}) {
    const auto a = dart_select(keys, hidden, {10, n, budget}, text, official);
    EXPECT_EQ(static_cast<int64_t>(a.size()), 4 + 8 * (budget / 8)) << budget;  // 128 -> 132
    const auto b = dart_select(keys, hidden, {10, n, budget}, text, exact);
    EXPECT_EQ(static_cast<int64_t>(b.size()), budget);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    EXPECT_TRUE(std::adjacent_find(a.begin(), a.end()) == a.end());
    EXPECT_GE(a.front(), 10);
    EXPECT_LT(a.back(), 10 + n);
  }
}

TEST(InDecoderPruner, LayerMustLeaveLayersOnBothSides) {
  BaselineOptions o;
  o.fastv_layer = 0;
  test::expect_invalid_argument([&] { make_in_decoder_pruner("fastv", o, 4); }, "fastv_layer");
  o.fastv_layer = 4;
  test::expect_invalid_argument([&] { make_in_decoder_pruner("fastv", o, 4); }, "fastv_layer");
  o.dart_layer = 9;
  test::expect_invalid_argument([&] { make_in_decoder_pruner("dart", o, 4); }, "dart_layer");
  o.fastv_layer = 3;
  EXPECT_EQ(make_in_decoder_pruner("fastv", o, 4)->layer(), 3);
  EXPECT_EQ(find_method("dart").stage, MethodStage::kInDecoder);
  EXPECT_EQ(find_method("era").stage, MethodStage::kBeforeDecoder);
}

// ---- the pruned model against the eager mask implementation -----------------------------------

using test::max_rel_error;

class PrunedModel : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { bundle_ = new ModelBundle(load_bundle(test::bundle_dir(), torch::kCPU)); }
  static void TearDownTestSuite() { delete bundle_; }

  PromptSequence sequence(Decoder& dec) {
    const std::string logits = test::testdata_dir() + "/logits/";
    std::ifstream in(logits + "input_ids.json");
    const auto j = nlohmann::json::parse(in);
    VisionEncoder vision(*bundle_);
    ReductionInput input;
    input.embeddings = vision.encode(read_npy(logits + "pixel_values.npy")).embeddings[0];
    return build_sequence(dec, j["ids"].get<std::vector<int64_t>>(), j["image_token_id"], -1, {FullReducer().reduce(input)});
  }

  static ModelBundle* bundle_;
  c10::InferenceMode inference_;
};
ModelBundle* PrunedModel::bundle_ = nullptr;

TEST_P(PrunedModel, PrefillAndDecodeMatchTheMaskImplementation) {
  const std::string dir = test::testdata_dir() + "/pruning/";
  const auto ref = nlohmann::json::parse(test::read_file(dir + GetParam() + ".json"));
  const auto ref_logits = read_npy(dir + GetParam() + "_logits.npy");  // [1 + steps, V]
  Decoder dec(*bundle_);
  ASSERT_TRUE(dec.supports_layer_ranges());
  const PromptSequence seq = sequence(dec);
  ASSERT_EQ(seq.segments[1].start, ref["image_start"].get<int64_t>());

  BaselineOptions options;
  options.fastv_layer = options.dart_layer = ref["layer"].get<int64_t>();
  options.dart_exact_budget = ref["exact_budget"].get<bool>();
  const auto pruner = make_in_decoder_pruner(ref["method"], options, dec.num_layers());
  InDecoderPruning pruning;
  pruning.pruner = pruner.get();
  pruning.spans = {{ref["image_start"], ref["image_length"], ref["budget"]}};

  const auto greedy = ref["greedy"].get<std::vector<int64_t>>();
  const int64_t L = seq.length(), steps = static_cast<int64_t>(greedy.size());
  KvCache cache = dec.make_cache(1, L + steps);
  const PrunedPrefill pre = prefill_pruned(dec, seq, pruning, cache);

  // The same tokens kept (selected independently in Python) ...
  const auto want_kept = ref["kept"].get<Positions>();
  Positions kept_image;
  for (const int64_t o : pre.kept_in_span[0]) kept_image.push_back(o + ref["image_start"].get<int64_t>());
  EXPECT_EQ(kept_image, want_kept);
  EXPECT_EQ(pre.visual_tokens, static_cast<int64_t>(want_kept.size()));
  EXPECT_EQ(static_cast<int64_t>(pre.kept_positions.size()), L - seq.visual_tokens() + pre.visual_tokens);

  // ... the same prefill logits ...
  const double prefill_error = max_rel_error(pre.logits[0][0], ref_logits[0]);
  EXPECT_LE(prefill_error, 1e-4);
  // (and pruning changed them: the test would not notice a no-op otherwise)
  const auto full_logits = read_npy(test::testdata_dir() + "/logits/logits.npy");
  EXPECT_GT(max_rel_error(pre.logits[0][0], full_logits[-1]), 1e-3);

  // ... and every decode step over the pruned cache equals the eager full recompute.
  double decode_error = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const auto logits =
        decode_pruned(dec, dec.embed(torch::full({1, 1}, greedy[t], torch::kLong)), L + t, pruner->layer(), cache);
    decode_error = std::max(decode_error, max_rel_error(logits[0][0], ref_logits[t + 1]));
    if (t + 1 < steps) {
      EXPECT_EQ(logits[0][0].argmax().item<int64_t>(), greedy[t + 1]) << "step " << t;
    }
  }
  EXPECT_LE(decode_error, 1e-4);
  std::cout << "[ pruning ] " << GetParam() << ": kept " << pre.visual_tokens << ", prefill rel error " << prefill_error
            << ", decode rel error " << decode_error << "\n";

  // Layers < K hold the whole prompt, layers >= K the kept positions, plus the decode steps.
  const int64_t K = pruner->layer();
  EXPECT_EQ(cache.layer_length(K - 1), L + steps);
  EXPECT_EQ(cache.layer_length(K), static_cast<int64_t>(pre.kept_positions.size()) + steps);
  EXPECT_FALSE(cache.uniform());
}

INSTANTIATE_TEST_SUITE_P(Methods, PrunedModel, ::testing::Values("fastv_k1_b64", "dart_k1_b64", "dart_k1_b61_exact"));

}  // namespace
}  // namespace era
