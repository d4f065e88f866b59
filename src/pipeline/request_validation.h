#pragma once
// Internal (the public checks are era::validate_request in era/era.h): the model-dependent check
// by context length alone, for the Session, which has no ModelInfo at hand.
#include <cstdint>

#include "era/era.h"

namespace era {

// validate_request(r), then max_new_tokens < max_context; throws era::Error(kInvalidArgument).
void validate_request(const Request& request, int64_t max_context);

}  // namespace era
