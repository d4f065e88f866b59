#include "reduce/lar_schedule.h"

#include <algorithm>

namespace era {

std::vector<float> lar_layer_scales(const EraOptions& options, int num_layers) {
  std::vector<float> scales(static_cast<size_t>(std::max(num_layers, 0)), 0.0f);
  if (!options.rectify) return scales;
  for (int l = 0; l < num_layers; ++l) {
    switch (options.lar_schedule) {
      case LarSchedule::kAllLayers: scales[l] = 1.0f; break;
      case LarSchedule::kEarlyLayers: scales[l] = l < options.lar_early_layers ? 1.0f : 0.0f; break;
      case LarSchedule::kLinearDecay: scales[l] = 1.0f - static_cast<float>(l) / static_cast<float>(num_layers); break;
    }
  }
  return scales;
}

}  // namespace era
