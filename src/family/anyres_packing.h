#pragma once
// LLaVA-NeXT's visual sequence for one image: the base crop's tokens, then the tile grid
// re-assembled, unpadded (HF's rounding) and closed by one image_newline token per row. Works on
// reduced tokens, so a reduction chosen per crop (or globally) before unpad follows the same
// permutation and unpad, as CDPruner does; newline tokens are always kept, with bias 0.
#include <torch/script.h>

#include <vector>

#include "family/anyres.h"
#include "reduce/reducer.h"

namespace era {

struct AnyresGeometry {
  Resolution original;            // image size before anyres
  int64_t rows = 0, cols = 0;     // tile grid
  int64_t patches_per_side = 24;  // tokens per tile side (336 / 14)
};

// Rows [top, bottom) and columns [left, right) of the (rows*p) x (cols*p) token grid that survive
// unpad, with HF's rule (modeling_llava_next.unpad_image): with h x w the grid, if W0/H0 > w/h
// then new_h = int(round(H0 * (w / W0), 7)), pad = (h - new_h) // 2, rows [pad, h - pad);
// otherwise the same on columns with new_w = int(round(W0 * (h / H0), 7)). The trim is symmetric,
// so new_h + 1 rows survive when h - new_h is odd. (The original LLaVA's plain int() differs on
// some sizes, e.g. 55x176, 88x99, 205x656 as HxW.)
struct UnpadBox {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};
UnpadBox unpad_box(const AnyresGeometry& geometry);

// Tokens of the unreduced NeXT sequence: p*p (base) + kept rows * (kept cols + 1 newline).
int64_t anyres_token_count(const AnyresGeometry& geometry);

// Per-crop reductions (crop c covers original tokens [c*N, (c+1)*N)) joined into one, as if a
// single reduction had run over all crops: kept indices offset by c*N, assignments by the number
// of slots of the earlier crops (-1 stays -1), embeddings, log_bias and entropy concatenated
// (entropy must be present on all crops or on none; a missing log_bias counts as zeros; off_grid
// is concatenated if any crop has it, false for crops without). Throws
// era::Error(kInvalidArgument) on an empty list or inconsistent sizes.
ReducedTokens concat_crops(const std::vector<ReducedTokens>& per_crop, int64_t tokens_per_crop);

// The decoder's tokens for the image: `joint` reduces the concatenated crops (base first, then
// tiles row-major; 1 + rows*cols crops of p*p tokens). Output order: base tokens in kept order;
// then for each surviving grid row, its surviving tokens left to right and one `image_newline`
// [D] token (log bias 0, kept index -1). Tokens outside the unpad box are dropped with their
// whole cluster (assignment -1).
//
// Grid geometry: patch (pr, pc) of tile (tr, tc) (joint index (1 + tr*cols + tc)*p*p + pr*p + pc)
// sits at grid row tr*p + pr, column tc*p + pc. The result follows ReducedTokens except that
// `kept` is in output order (not ascending) and holds -1 for newlines; `assignment` (size N of
// the joint input) maps each original token to its cluster's new slot, or -1 if the token was
// dropped by the reduction or its anchor by unpad (a member outside the box whose anchor is
// inside keeps its slot); `embeddings` rows are gathered (newline rows = image_newline cast to
// the embeddings' dtype and device); `log_bias` gathered, 0 on newlines; `entropy` unchanged.
// Tile tokens marked `off_grid` (VisionZip's CLS and contextual tokens) have no cell: they follow
// the last newline in slot order, whatever the unpad box (base tokens stay first either way);
// `off_grid` is carried to the output order.
// With the identity ("full") reduction this is exactly HF's packed feature sequence.
// Throws era::Error(kInvalidArgument) on sizes that do not match the geometry.
ReducedTokens pack_anyres(const ReducedTokens& joint, const AnyresGeometry& geometry, const torch::Tensor& image_newline);

}  // namespace era
