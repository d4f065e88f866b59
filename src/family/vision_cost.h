#pragma once
// What a bundle's vision tower and projector cost in FLOPs, by its family: era_bench's count of
// the stages before the decoder (apps/bench/flops.h). Each family writes its own formula (a fixed
// crop through a CLIP / SigLIP tower; native-resolution items through windowed attention).
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/manifest.h"

namespace era {

// Native-resolution items of a request: (t, h, w) in patches (PreparedInput::grids).
using ItemGrids = std::vector<std::array<int64_t, 3>>;

struct VisionCost {
  // The tower's and the projector's FLOPs for a request of `crops` fixed-size crops (families
  // that cut images into crops) or of the native-resolution items `grids` (the others).
  std::function<double(int64_t crops, const ItemGrids&grids)> vision, projector;
};

// The cost formulas of `manifest`'s family (family/registry.cpp); throws era::Error(kBundle) for
// an arch this build does not serve.
VisionCost vision_cost(const Manifest& manifest);

}  // namespace era
