#pragma once
// VisionZip (CVPR'25): dominant tokens by the feature layer's CLS attention, plus contextual
// tokens merged by key similarity, before the projector (dvlab-research/VisionZip,
// clip_encoder.py; baselines.md §3).
#include <cstdint>

#include "reduce/reducer.h"

namespace era {

struct VisionZipSplit {
  int64_t dominant = 0;    // d: the CLS token + (d - 1) top patches
  int64_t contextual = 0;  // c: merged tokens
};

// budget -> d + c with c = round(budget * contextual_fraction), capped so d >= 1 (the CLS token):
// 64 -> 54 + 10, 128 -> 108 + 20, 192 -> 162 + 30, 32 -> 27 + 5 with the default 10/64.
VisionZipSplit visionzip_split(int64_t budget, double contextual_fraction);

class VisionZipReducer final : public Reducer {
 public:
  explicit VisionZipReducer(double contextual_fraction) : contextual_fraction_(contextual_fraction) {}
  std::string name() const override { return "visionzip"; }
  // Per crop. s = CLS->patch attention summed over heads (input.cls_probs); dominant = the d-1
  // patches with the largest s (ties: first index) in raster order, after the CLS token
  // (input.cls_feature). The other M patches, in raster order, get c targets at positions
  // 0, step, 2*step, ... (step = max(1, M / c)) of that list; every non-target goes to the
  // target whose head-mean key (input.mean_keys) has the largest cosine (ties: first target), and
  // contextual token j = F[target j] + mean of F over its members (just F[target j] if none).
  // Merging runs on the vision features (float32, cast back), then input.project maps the
  // d + c tokens to the LLM: order [CLS, dominant (raster), contextual].
  // kept: the CLS token's anchor is the patch it attends to most; a contextual token's is its
  // target. off_grid is true for the CLS and contextual tokens. assignment: every patch belongs
  // to its dominant token or its contextual token (none is dropped; the CLS token has no member).
  // A budget >= N keeps every patch as it is (no CLS). Throws era::Error(kBundle) when the
  // bundle's vision module does not export the CLS feature and keys (exported before VisionZip
  // support), era::Error(kInvalidArgument) on missing inputs.
  ReducedTokens reduce(const ReductionInput& input) const override;

 private:
  double contextual_fraction_;
};

}  // namespace era
