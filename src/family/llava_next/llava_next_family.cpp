#include "family/llava_next/llava_next_family.h"

#include <algorithm>

#include "era/error.h"
#include "family/llava_next/anyres_packing.h"
#include "family/vision_input.h"
#include "image/anyres.h"
#include "reduce/budget.h"

namespace era {
namespace {

// A reduction chosen over an already packed sequence (`packed`, the "full" packing) expressed in
// the original tokens: `picked` are packed positions. Kept anchors come from the packing (-1 for
// a newline); an original token keeps its slot if its packed position was picked.
ReducedTokens compose_packed(const ReducedTokens& packed, const ReducedTokens& picked) {
  ReducedTokens out = picked;
  out.kept.clear();
  for (const int64_t pos : picked.kept) out.kept.push_back(packed.kept[static_cast<size_t>(pos)]);
  out.assignment.assign(packed.assignment.size(), -1);
  for (size_t i = 0; i < packed.assignment.size(); ++i) {
    const int64_t pos = packed.assignment[i];
    if (pos >= 0) out.assignment[i] = picked.assignment[static_cast<size_t>(pos)];
  }
  out.entropy.clear();
  return out;
}

}  // namespace

LlavaNextFamily::LlavaNextFamily(const ModelBundle& bundle) : LlavaFamilyBase(bundle), image_newline_(bundle.image_newline) {
  require_layout({ImageLayout::kAnyres});
  if (manifest_.image.grid_pinpoints.empty()) {
    throw Error(ErrorCode::kBundle, bundle_dir_ + "/manifest.json: image.grid_pinpoints is empty (LLaVA-NeXT needs them)");
  }
}

std::vector<cv::Mat> LlavaNextFamily::crops(const cv::Mat& rgb) const {
  return llava_next_crops(rgb, manifest_.image.grid_pinpoints, clip_);
}

int64_t LlavaNextFamily::max_crops() const {
  const int64_t s = manifest_.image.size;
  int64_t most = 1;
  for (const auto& p : manifest_.image.grid_pinpoints) most = std::max(most, 1 + (p.height / s) * (p.width / s));
  return most;
}

// The base crop plus the largest grid with its newlines, before unpad (2928 with the usual
// pinpoints).
int64_t LlavaNextFamily::max_visual_tokens() const {
  const auto& m = manifest_;
  const int64_t n = tokens_per_crop(), p = m.image.size / m.vision.patch_size;
  int64_t most = 0;
  for (const auto& r : m.image.grid_pinpoints) {
    most = std::max(most, n + (r.height / m.image.size * p) * (r.width / m.image.size * p + 1));
  }
  return most;
}

// Reduce per crop or over all crops, then pack (unpad, newlines) so the reduction follows the
// same permutation as the features. Methods that select over the packed sequence (DivPrune) pack
// first and select over the real tokens, newlines included, with `tokens` as the budget of the
// whole sequence.
ReducedTokens LlavaNextFamily::reduce_image(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                                            const ReductionRequest& request) const {
  const auto& m = manifest_;
  const VisionOutput& vision = *image.vision;
  const int64_t n = tokens_per_crop(), first = image.first, count = image.count;
  AnyresGeometry geometry;
  geometry.original = {image.size[0], image.size[1]};
  const Resolution best = select_best_resolution(geometry.original, m.image.grid_pinpoints);
  geometry.rows = best.height / m.image.size;
  geometry.cols = best.width / m.image.size;
  geometry.patches_per_side = m.image.size / m.vision.patch_size;
  if (method.capabilities.selects_packed_sequence) {
    const ReducedTokens packed = pack_anyres(FullReducer().reduce(joint_input(vision, first, count, 0)), geometry, image_newline_);
    ReductionInput in;
    in.embeddings = packed.embeddings;
    in.instruction_embeddings = image.instruction;
    in.budget = resolve_budget(request, packed.embeddings.size(0), request.tokens);
    return compose_packed(packed, reducer.reduce(in));
  }
  ReducedTokens joint;
  if (request.scope == "image") {
    if (method.capabilities.per_crop_only) {
      throw Error(ErrorCode::kInvalidArgument, "method " + method.name + " works on one crop's grid: use budget scope 'crop'");
    }
    ReductionInput in = joint_input(vision, first, count, resolve_budget(request, count * n, request.tokens));
    in.instruction_embeddings = image.instruction;
    joint = reducer.reduce(in);
  } else {
    const torch::Tensor image_embeddings = vision.embeddings.slice(0, first, first + count).flatten(0, 1);
    std::vector<ReducedTokens> per_crop;
    for (int64_t c = 0; c < count; ++c) {
      ReductionInput in = crop_input(vision, first + c, resolve_budget(request, n, request.tokens / max_crops()));
      in.instruction_embeddings = image.instruction;
      in.image_embeddings = image_embeddings;
      per_crop.push_back(reducer.reduce(in));
    }
    joint = concat_crops(per_crop, n);
  }
  return pack_anyres(joint, geometry, image_newline_);
}

}  // namespace era
