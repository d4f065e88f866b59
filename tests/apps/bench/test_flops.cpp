// The analytic FLOPs count against an independent hand count: 2 FLOPs per weight per token,
// with the weights counted from the tiny bundle's own TorchScript modules (not from the manifest
// dimensions the formulas use), plus the attention products written out.
#include <gtest/gtest.h>

#include <torch/script.h>

#include "apps/bench/flops.h"
#include "test_support.h"

namespace era {
namespace {

// Elements of the 2-D (matrix) parameters whose names start with `prefix`.
double matrix_params(const torch::jit::Module& m, const std::string& prefix) {
  double n = 0;
  for (const auto& p : m.named_parameters()) {
    if (p.name.rfind(prefix, 0) == 0 && p.value.dim() == 2) n += static_cast<double>(p.value.numel());
  }
  return n;
}

TEST(Flops, DecoderPrefillAndDecodeMatchACountOfTheModulesWeights) {
  const auto dims = bench::read_model_dims(test::bundle_dir());
  auto decoder = torch::jit::load(test::bundle_dir() + "/decoder.pt");
  const double layer_weights = matrix_params(decoder, "layers.0.");
  const double lm_head = matrix_params(decoder, "lm_head.");
  ASSERT_GT(layer_weights, 0);
  const double heads_x_dim = static_cast<double>(dims.heads * dims.head_dim);
  for (const int64_t T : {1, 7, 600}) {
    // causal attention: query t sees t+1 keys; QK^T and AV are 2 FLOPs per (query, key, dim) each
    double attention = 0;
    for (int64_t t = 0; t < T; ++t) attention += 2.0 * 2.0 * heads_x_dim * static_cast<double>(t + 1);
    const double expected = dims.layers * (2.0 * T * layer_weights + attention) + 2.0 * lm_head;
    EXPECT_DOUBLE_EQ(bench::prefill_flops(dims, T), expected) << "T=" << T;
  }
  const double step = dims.layers * (2.0 * layer_weights + 4.0 * heads_x_dim * 50) + 2.0 * lm_head;
  EXPECT_DOUBLE_EQ(bench::decode_step_flops(dims, 50), step);
  // what a step streams: every matrix of the decoder but the embedding table, which it gathers
  EXPECT_DOUBLE_EQ(bench::decode_step_weights(dims), matrix_params(decoder, "") - matrix_params(decoder, "embed_tokens."));
  EXPECT_DOUBLE_EQ(bench::decode_step_weights(dims), dims.layers * layer_weights + lm_head);
}

TEST(Flops, VisionAndProjectorMatchACountOfTheModulesWeights) {
  const auto dims = bench::read_model_dims(test::bundle_dir());
  auto vision = torch::jit::load(test::bundle_dir() + "/vision.pt");
  auto projector = torch::jit::load(test::bundle_dir() + "/projector.pt");
  double patch = 0;
  for (const auto& p : vision.named_parameters()) {
    if (p.name == "embeddings.patch_embedding.weight") patch = static_cast<double>(p.value.numel());
  }
  ASSERT_GT(patch, 0);
  const double n = dims.num_patches + 1, c = dims.vision_hidden;
  double layers = 0;
  for (int64_t i = 0; i < dims.vision_layers_run; ++i) {
    layers += 2.0 * n * matrix_params(vision, "encoder.layers." + std::to_string(i) + ".") + 2.0 * 2.0 * n * n * c;
  }
  // the family's formulas (family/llava_base.h, llava_vision_cost) for one crop
  EXPECT_DOUBLE_EQ(dims.vision_cost.vision(1, {}), 2.0 * dims.num_patches * patch + layers);
  EXPECT_DOUBLE_EQ(dims.vision_cost.projector(1, {}), 2.0 * dims.num_patches * matrix_params(projector, ""));
}

TEST(Flops, ARequestAddsItsPartsAndAveragesTheDecodeSteps) {
  const auto dims = bench::read_model_dims(test::bundle_dir());
  const auto f = bench::count_flops(dims, 5, 100, 3);  // decode steps see 101 and 102 keys
  EXPECT_DOUBLE_EQ(f.vision, 5 * dims.vision_cost.vision(1, {}));
  EXPECT_DOUBLE_EQ(f.decode_per_token, (bench::decode_step_flops(dims, 101) + bench::decode_step_flops(dims, 102)) / 2);
  EXPECT_DOUBLE_EQ(f.total(), f.vision + f.projector + f.prefill + 2 * f.decode_per_token);
  EXPECT_GT(bench::prefill_flops(dims, 640), bench::prefill_flops(dims, 128));
}

// FastV / DART: the first K layers run over the whole prompt, the others over the pruned one.
TEST(Flops, InDecoderPruningCountsEachLayerGroupAtItsOwnLength) {
  const auto dims = bench::read_model_dims(test::bundle_dir());
  ASSERT_EQ(dims.layers, 2);
  const auto pruned = bench::count_flops(dims, 1, 100, 2, {1, 600});
  const auto full = bench::count_flops(dims, 1, 600, 2);
  const auto small = bench::count_flops(dims, 1, 100, 2);
  const double head = 2.0 * dims.hidden * dims.vocab;
  // one layer at each length, one LM head
  EXPECT_DOUBLE_EQ(pruned.prefill, (full.prefill - head) / 2 + (small.prefill - head) / 2 + head);
  EXPECT_DOUBLE_EQ(pruned.decode_per_token, (full.decode_per_token - head) / 2 + (small.decode_per_token - head) / 2 + head);
  // K = 0 is no early group at all
  EXPECT_DOUBLE_EQ(bench::count_flops(dims, 1, 100, 2, {0, 600}).prefill, small.prefill);
}

TEST(Flops, MissingBundleIsABundleError) {
  try {
    bench::read_model_dims(test::scratch_dir("flops_no_bundle"));
    FAIL() << "expected era::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
  }
}

}  // namespace
}  // namespace era
