#pragma once
// Choosing a reduction method by name: "full", "era" or "era:<variant>" (see era_options.h), or
// one of the competing methods (README "Competing methods"). The in-decoder methods "fastv" and
// "dart" get "full" here: their pruning happens in the decoder's prefill
// (runtime/in_decoder_pruning.h), wired by the Session.
#include <memory>
#include <string>
#include <vector>

#include "reduce/baseline_options.h"
#include "reduce/era_options.h"
#include "reduce/reducer.h"

namespace era {

struct ReductionOptions {
  std::string method = "full";
  EraOptions era;  // used by "era" and its variants
  BaselineOptions baselines;  // used by the competing methods
};

// The reducer for `options.method`; throws era::Error(kInvalidArgument) for an unknown method,
// listing the known ones.
std::unique_ptr<Reducer> make_reducer(const ReductionOptions& options);

// The competing methods that run before the decoder, like ERA: divprune, visionzip, cdpruner,
// pool, random.
const std::vector<std::string>& pre_llm_baseline_names();

// True for methods that select over LLaVA-NeXT's packed image sequence (base + unpadded grid +
// newline tokens) instead of per crop: DivPrune, whose official NeXT path is global (§4.3).
bool reduces_packed_sequence(const std::string& method);

// True for methods defined on one crop's token grid only (VisionZip, pool): they refuse
// LLaVA-NeXT's "image" budget scope.
bool selects_per_crop_only(const std::string& method);

// True for methods that need ReductionInput::instruction_embeddings (CDPruner).
bool needs_instruction_embeddings(const std::string& method);

// The ERA options a method string implies ("era:dep-x" -> variant applied); `options.era` for
// anything else.
EraOptions effective_era_options(const ReductionOptions& options);

}  // namespace era
