#pragma once
// A vision pass handed to a reduction method: one crop, or several crops joined, as a
// ReductionInput (every family's methods read their inputs this way).
#include "model/vision_encoder.h"
#include "reduce/reducer.h"

namespace era {

// Crop `i` of `vision` with the given budget.
ReductionInput crop_input(const VisionOutput& vision, int64_t i, int64_t budget);
// Crops [first, first + count) as one input: tokens and saliency columns concatenated.
ReductionInput joint_input(const VisionOutput& vision, int64_t first, int64_t count, int64_t budget);

}  // namespace era
