#include "reduce/method.h"

#include "era/error.h"

namespace era {

std::unique_ptr<Reducer> make_reducer(const ReductionOptions& options) {
  if (options.method == "full") return std::make_unique<FullReducer>();
  throw Error(ErrorCode::kInvalidArgument, "unknown reduction method '" + options.method + "' (available: full)");
}

EraOptions effective_era_options(const ReductionOptions& options) { return options.era; }

}  // namespace era
