#pragma once
// The picture of a reduction, as the paper draws them: the image as the vision tower saw it
// (PreparedInput::crops) under a light overlay: every patch tinted by the cluster it was merged
// into, kept tokens (anchors) ringed, dropped patches dimmed, faint patch-grid lines.
#include <cstdint>
#include <string>

#include "era/era.h"
#include "era/image.h"

namespace era {

// `crop`: a square RGB pixel image (PreparedInput::crops[i]); `grid`: patches per side;
// `reduction`: that crop's slice of an ImageReduction (assignment of grid * grid tokens, kept
// anchors as indices into the grid). Returns RGB pixels `scale` times larger. Throws
// era::Error(kInvalidArgument) if the sizes do not match.
Image draw_reduction(const Image& crop, int64_t grid, const ImageReduction& reduction, int scale = 2);

// One picture of a whole request, with a legend: its images side by side, each a LLaVA-1.5 crop
// at twice its size, or a LLaVA-NeXT image as its base crop beside its tiles stitched into their
// grid. `input`: era::Session::prepare(request) (or era::debug::prepare); `result`: generate() of
// the same request; `model`: Session::info(). Throws era::Error(kInvalidArgument) if they do not
// belong together or the request has no image. (era_infer --save-viz writes it.)
Image draw_request_reduction(const PreparedInput& input, const Result& result, const ModelInfo& model);

// Writes a pixel image (Image::from_pixels, or draw_reduction's result) as a PNG; throws
// era::Error(kInvalidArgument) naming `path` if it cannot.
void save_png(const Image& image, const std::string& path);

}  // namespace era
