#pragma once
// Optional, for parity checks and debugging tools: the exact tensors a Session feeds its model.
// Unlike era/era.h this header needs LibTorch's headers (and the program must link LibTorch,
// which it does anyway through era::era).
#include <torch/script.h>

#include "era/era.h"

namespace era::debug {

// float32 [crops, 3, S, S]: every image crop of `request` after normalisation, in order (what
// the vision tower gets; PreparedInput::crops are the same crops before it). Throws as
// Session::prepare.
torch::Tensor pixel_values(const Session& session, const Request& request);

}  // namespace era::debug
