#pragma once
// Internal header. Stage 3: the vision output reduced image by image with the request's method
// (the registry's entry, the family's budget split and packing), and what the decoder stages need
// from the method: LAR's settings and, for FastV / DART, the in-decoder pruner with its spans.
#include <memory>
#include <vector>

#include "era/era.h"
#include "model/decoder.h"
#include "pipeline/preparation.h"
#include "pipeline/session_internals.h"
#include "reduce/registry.h"
#include "runtime/in_decoder_pruning.h"
#include "runtime/sequence.h"

namespace era {

struct ReducedImages {
  std::vector<ReducedTokens> tokens;
  std::vector<ImageReduction> descriptions;
};

// Every image of a request (crops as PreparedInput counts them; native-resolution items by their
// grids) through the method of `request`.
ReducedImages reduce_images(const SessionState& impl, const VisionOutput& vision, const PreparedRequest& prepared,
                            const Request& request);

// The vision pass of a prepared request: fixed-size crops, or native-resolution patches and grids.
VisionOutput encode_vision(const SessionState& impl, const PreparedRequest& prepared);

// LAR's per-layer scales and kernel path for the request's method (no bias for methods that do
// not rectify attention).
LarSettings lar_settings(const ReductionRequest& request, int64_t num_layers);

// FastV / DART: the pruner and one span per image (its budget over the whole span). Empty for
// every other method.
struct InDecoderSetup {
  std::unique_ptr<InDecoderPruner> pruner;
  InDecoderPruning pruning;
};
InDecoderSetup in_decoder_setup(const ReductionRequest& request, const PromptSequence& sequence, const Decoder& decoder);

// Rewrites each image's description to what layers >= K kept (`kept_in_span`: offsets inside the
// image's span, whose full description lists the original index at each offset).
void describe_in_decoder(const std::vector<std::vector<int64_t>>& kept_in_span, std::vector<ImageReduction>& reductions);

}  // namespace era
