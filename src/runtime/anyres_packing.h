#pragma once
// LLaVA-NeXT's visual sequence for one image: the base crop's tokens, then the tile grid
// re-assembled, unpadded (HF's rounding) and closed by one image_newline token per row. Works on
// reduced tokens, so a reduction chosen per crop (or globally) before unpad follows the same
// permutation and unpad, as CDPruner does; newline tokens are always kept, with bias 0.
#include <torch/script.h>

#include <vector>

#include "image/anyres.h"
#include "reduce/reducer.h"

namespace era {

struct AnyresGeometry {
  Resolution original;           // image size before anyres
  int64_t rows = 0, cols = 0;    // tile grid
  int64_t patches_per_side = 24; // tokens per tile side (336 / 14)
};

// Rows [top, bottom) and columns [left, right) of the (rows*p) x (cols*p) token grid that survive
// unpad, with HF's rule (int(round(x, 7)), symmetric trim of the padding).
struct UnpadBox {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
};
UnpadBox unpad_box(const AnyresGeometry& geometry);

// Tokens of the unreduced NeXT sequence: p*p (base) + kept rows * (kept cols + 1 newline).
int64_t anyres_token_count(const AnyresGeometry& geometry);

// Per-crop reductions (crop c covers original tokens [c*N, (c+1)*N)) joined into one, as if a
// single reduction had run over all crops: kept indices and assignments offset, rows concatenated.
ReducedTokens concat_crops(const std::vector<ReducedTokens>& per_crop, int64_t tokens_per_crop);

// The decoder's tokens for the image: `joint` reduces the concatenated crops (base first, then
// tiles row-major; 1 + rows*cols crops of p*p tokens). Output order: base tokens in kept order;
// then for each surviving grid row, its surviving tokens left to right and one `image_newline`
// [D] token (log bias 0, kept index -1). Tokens outside the unpad box are dropped with their
// whole cluster (assignment -1).
ReducedTokens pack_anyres(const ReducedTokens& joint, const AnyresGeometry& geometry, const torch::Tensor& image_newline);

}  // namespace era
