#pragma once
// Choosing a reduction method by name: "full", "era" or "era:<variant>" (see era_options.h).
// The in-decoder methods "fastv" and "dart" get "full" here: their pruning happens in the
// decoder's prefill (runtime/in_decoder_pruning.h), wired by the Session.
#include <memory>
#include <string>

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

// The ERA options a method string implies ("era:dep-x" -> variant applied); `options.era` for
// anything else.
EraOptions effective_era_options(const ReductionOptions& options);

}  // namespace era
