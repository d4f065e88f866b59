#pragma once
// Analytic FLOPs of one LLaVA request, from the model's dimensions: what the hardware must at
// least do, to compare measured speed-ups with the ideal one.
//
// One multiply-add = 2 FLOPs. Only matrix products are counted (norms, softmax, RoPE, GELU and
// the reduction itself are O(tokens x width) and negligible at real sizes).
//
//   vision, per crop (N = num_patches + 1 tokens incl. CLS, C = width, I = MLP width,
//   L = layers_run, P = patch):
//       2 * num_patches * 3P^2 * C                       patch embedding
//     + L * [ 2N(4C^2 + 2CI) + 4 N^2 C ]                 q/k/v/o + MLP, QK^T and AV
//   projector, per crop (D = decoder width):  2 * num_patches * (C D + D^2)
//   decoder prefill of T prompt tokens (H heads, Hkv kv heads, d = head_dim, F = MLP width,
//   L = layers, V = vocab):
//       L * [ 2T(2DHd + 2DHkv d + 3DF) + 4 H d T(T+1)/2 ]    projections + MLP, causal QK^T and AV
//     + 2 D V                                                  LM head, last position only
//   one decode step at context t (t keys incl. the new one):
//       L * [ 2(2DHd + 2DHkv d + 3DF) + 4 H d t ] + 2 D V
//   native-resolution tower (Qwen2.5-VL), items of (t, h, w) patches, Np patches in all:
//       2 * Np * (3 T P^2) * C                            Conv3d patch embedding (T frames a patch)
//     + L * [ 2 Np (4C^2 + 3CI) + 4 C sum(S^2) ]          fused q/k/v + o, gated MLP; attention
//                                                          within each segment S: a window (of
//                                                          window_size px a side) or, in the
//                                                          full-attention layers, a temporal slice
//   projector (its merger MLP), per merged token:  2 * (4C * 4C + 4C * D)
//   in-decoder pruning (FastV, DART) after layer K: layers < K count the whole prompt T0 (and
//   contexts T0 + s), layers >= K the pruned prompt T (and T + s).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "family/vision_cost.h"

namespace era::bench {

struct ModelDims {
  // vision tower
  int64_t image_size = 336, patch_size = 14, num_patches = 576;
  int64_t vision_hidden = 0, vision_intermediate = 0, vision_layers_run = 0;
  // the tower's and projector's FLOP formulas: the bundle's family's (family/vision_cost.h)
  VisionCost vision_cost;
  // decoder
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
};

// The dimensions in a bundle's manifest.json. vision.intermediate_size is optional there (older
// bundles): 4 x vision hidden, CLIP's ratio, when absent. Throws era::Error(kBundle).
ModelDims read_model_dims(const std::string& bundle_dir);
// The same of a manifest already read (a bundle's, or the one built from a Hugging Face folder).
ModelDims model_dims(const Manifest& manifest);

struct FlopCount {
  double vision = 0;            // all crops
  double projector = 0;         // all crops
  double prefill = 0;           // decoder over the prompt
  double decode_per_token = 0;  // mean over the generated tokens
  double total() const;         // vision + projector + prefill + decode of all generated tokens
  int64_t generated = 0;
};

double prefill_flops(const ModelDims& m, int64_t prompt_tokens);
double decode_step_flops(const ModelDims& m, int64_t context);  // context = keys the step attends to
// The weights one decode step reads: every decoder layer's projections and MLP, and the LM head
// (the embedding table is only gathered). Times the bytes per weight: what a step must stream
// from memory at least (era_bench --vs-machine gives decode as a share of the read rate).
double decode_step_weights(const ModelDims& m);

// The first `layers` decoder layers saw `prompt_tokens` (in-decoder pruning); none by default.
struct EarlyLayers {
  int64_t layers = 0;
  int64_t prompt_tokens = 0;
};

// A request with `crops` vision crops (a native-resolution tower: its items' `grids` instead; the
// family's formulas decide which counts),
// `prompt_tokens` decoder prompt tokens and `generated` answer tokens (decode steps =
// generated - 1: the last token is never fed back).
FlopCount count_flops(const ModelDims& m, int64_t crops, int64_t prompt_tokens, int64_t generated, const EarlyLayers& early = {},
                      const std::vector<std::array<int64_t, 3>>& grids = {});

}  // namespace era::bench
