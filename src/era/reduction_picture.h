#pragma once
// The picture of a reduction, as the paper draws them: one crop as the vision tower saw it
// (PreparedInput::crops), its patch grid, every patch tinted by the cluster it was merged into,
// anchors marked with white dots, dropped patches darkened.
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

// Writes a pixel image (Image::from_pixels, or draw_reduction's result) as a PNG; throws
// era::Error(kInvalidArgument) naming `path` if it cannot.
void save_png(const Image& image, const std::string& path);

}  // namespace era
