// LLaVA-NeXT against the eager reference (tests/python/make_next_refs.py): the anyres crops fed to
// the vision tower, the packed visual sequence (base, unpadded grid, newlines) and the logits.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "era/debug.h"
#include "era/era.h"
#include "family/anyres_packing.h"
#include "family/vision_input.h"
#include "model/bundle.h"
#include "model/decoder.h"
#include "model/vision_encoder.h"
#include "parity_support.h"
#include "runtime/sequence.h"
#include "test_support.h"
#include "util/npy.h"

namespace era {
namespace {

std::string ref(const std::string& name) { return test::testdata_dir() + "/next/" + name; }

using test::max_rel_error;

using test::read_json;

TEST(NextParity, CropsPackedSequenceAndLogitsMatchEager) {
  c10::InferenceMode guard;
  auto session = Session::open(test::next_bundle_dir());
  Request req;
  req.images = {test::source_dir() + "/tests/data/sample.png"};
  req.prompt = "What is shown in this image?";
  const auto in = debug::prepare(session, req);
  const auto pixels = read_npy(ref("pixel_values.npy"));
  ASSERT_EQ(in.pixel_values.sizes(), pixels.sizes());
  EXPECT_TRUE(torch::equal(in.pixel_values, pixels));  // Pillow-exact anyres crops
  const auto ids = read_json(ref("input_ids.json"));
  EXPECT_EQ(in.token_ids, ids["ids"].get<std::vector<int64_t>>());

  auto bundle = load_bundle(test::next_bundle_dir(), torch::kCPU);
  VisionEncoder vision(bundle);
  const auto v = vision.encode(pixels);
  const auto info = read_json(ref("info.json"));
  AnyresGeometry g;
  g.original = {in.image_sizes[0][0], in.image_sizes[0][1]};
  g.rows = info["rows"];
  g.cols = info["cols"];
  g.patches_per_side = 24;
  std::vector<ReducedTokens> crops;
  for (int64_t c = 0; c < pixels.size(0); ++c) crops.push_back(FullReducer().reduce(crop_input(v, c, 0)));
  const auto packed = pack_anyres(concat_crops(crops, 576), g, projector_parameter(bundle, "image_newline"));
  const auto want = read_npy(ref("packed.npy"));
  ASSERT_EQ(packed.embeddings.sizes(), want.sizes());
  EXPECT_EQ(packed.embeddings.size(0), info["tokens"].get<int64_t>());
  EXPECT_EQ(anyres_token_count(g), info["tokens"].get<int64_t>());
  EXPECT_LE(max_rel_error(packed.embeddings, want), 1e-4);

  Decoder dec(bundle);
  const auto seq = build_sequence(dec, in.token_ids, bundle.manifest.tokens.image_token_id, -1, {packed});
  auto cache = dec.make_cache(1, seq.length());
  const auto logits = dec.forward(seq.embeds, seq.positions, seq.key_log_bias, cache, false);
  const double err = max_rel_error(logits[0], read_npy(ref("logits.npy")));
  std::cout << "[ measured ] NeXT logits max relative error vs eager: " << err << "\n";
  EXPECT_LE(err, 1e-4);
}

// The paper's NeXT budgets: 160/320/640 nominal = 32/64/128 per crop; newlines come on top and
// unpad may drop selected tokens, so the real count is reported.
TEST(NextEra, NominalBudgetsPerCropAndRealCounts) {
  auto session = Session::open(test::next_bundle_dir());
  Request req;
  req.images = {test::source_dir() + "/tests/data/sample.png"};
  req.prompt = "What is shown in this image?";
  req.max_new_tokens = 2;
  const auto full = session.generate(req);
  const int64_t crops = session.prepare(req).crops_per_image[0];
  int64_t previous = 0;
  for (const int64_t nominal : {160, 320, 640}) {
    req.reduction.method = "era";
    req.reduction.tokens = nominal;
    const auto r = session.generate(req);
    ASSERT_EQ(r.reductions.size(), 1u);
    const auto& red = r.reductions[0];
    const auto newlines = std::count(red.kept.begin(), red.kept.end(), int64_t{-1});
    const int64_t selected = static_cast<int64_t>(red.kept.size()) - newlines;
    EXPECT_LE(selected, crops * (nominal / 5)) << nominal;  // unpad can only drop
    EXPECT_GE(selected, nominal / 5) << nominal;            // the base crop keeps its share
    EXPECT_EQ(r.stats.visual_tokens, static_cast<int64_t>(red.kept.size())) << nominal;
    EXPECT_LT(r.stats.visual_tokens, full.stats.visual_tokens) << nominal;
    EXPECT_GT(r.stats.visual_tokens, previous) << nominal;
    for (size_t i = 0; i < red.kept.size(); ++i) {
      if (red.kept[i] == -1) {
        EXPECT_FLOAT_EQ(red.bias[i], 1.0f);
      }  // newlines: no rectification
    }
    previous = r.stats.visual_tokens;
  }
  // One global budget over all crops keeps exactly the nominal count before unpad.
  req.reduction.scope = "image";
  req.reduction.tokens = 160;
  const auto global = session.generate(req);
  const auto& red = global.reductions[0];
  EXPECT_LE(static_cast<int64_t>(red.kept.size()) - std::count(red.kept.begin(), red.kept.end(), int64_t{-1}), 160);
}

}  // namespace
}  // namespace era
