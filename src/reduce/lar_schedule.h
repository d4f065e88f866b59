#pragma once
// Which decoder layers LAR rectifies, and how strongly: per-layer multipliers of log b_k.
#include <vector>

#include "era/options.h"

namespace era {

// Per-layer multipliers of log b for a decoder with `num_layers` layers under `options`
// (all ones, ones then zeros, or linear decay 1 - l/L); all zeros when rectify is off.
std::vector<float> lar_layer_scales(const EraOptions& options, int num_layers);

}  // namespace era
