#include "family/anyres_reduction.h"

#include "era/error.h"
#include "family/anyres.h"
#include "family/vision_input.h"
#include "reduce/budget.h"

namespace era {

AnyresGeometry anyres_geometry(const LlavaImageSpec& image, int64_t patch_size, const std::array<int64_t, 2>& size) {
  AnyresGeometry geometry;
  geometry.original = {size[0], size[1]};
  const Resolution best = select_best_resolution(geometry.original, image.grid_pinpoints);
  geometry.rows = best.height / image.size;
  geometry.cols = best.width / image.size;
  geometry.patches_per_side = image.size / patch_size;
  return geometry;
}

ReducedTokens reduce_crops(const ImageTokens& image, const MethodSpec& method, const Reducer& reducer,
                           const ReductionRequest& request, int64_t tokens_per_crop, int64_t per_crop_nominal) {
  const VisionOutput& vision = *image.vision;
  const int64_t n = tokens_per_crop, first = image.first, count = image.count;
  if (request.scope == "image") {
    if (method.capabilities.per_crop_only) {
      throw Error(ErrorCode::kInvalidArgument, "method " + method.name + " works on one crop's grid: use budget scope 'crop'");
    }
    ReductionInput in = joint_input(vision, first, count, resolve_budget(request, count * n, request.tokens));
    in.instruction_embeddings = image.instruction;
    return reducer.reduce(in);
  }
  const torch::Tensor image_embeddings = vision.embeddings.slice(0, first, first + count).flatten(0, 1);
  std::vector<ReducedTokens> per_crop;
  for (int64_t c = 0; c < count; ++c) {
    ReductionInput in = crop_input(vision, first + c, resolve_budget(request, n, per_crop_nominal));
    in.instruction_embeddings = image.instruction;
    in.image_embeddings = image_embeddings;
    per_crop.push_back(reducer.reduce(in));
  }
  return concat_crops(per_crop, n);
}

ReducedTokens select_over_packed(const ReducedTokens& packed, const ImageTokens& image, const Reducer& reducer,
                                 const ReductionRequest& request) {
  ReductionInput in;
  in.embeddings = packed.embeddings;
  in.instruction_embeddings = image.instruction;
  in.budget = resolve_budget(request, packed.embeddings.size(0), request.tokens);
  const ReducedTokens picked = reducer.reduce(in);
  ReducedTokens out = picked;
  out.kept.clear();
  out.off_grid.clear();
  for (const int64_t pos : picked.kept) {
    out.kept.push_back(packed.kept[static_cast<size_t>(pos)]);
    if (!packed.off_grid.empty()) out.off_grid.push_back(packed.off_grid[static_cast<size_t>(pos)]);
  }
  out.assignment.assign(packed.assignment.size(), -1);
  for (size_t i = 0; i < packed.assignment.size(); ++i) {
    const int64_t pos = packed.assignment[i];
    if (pos >= 0) out.assignment[i] = picked.assignment[static_cast<size_t>(pos)];
  }
  out.entropy.clear();
  return out;
}

}  // namespace era
