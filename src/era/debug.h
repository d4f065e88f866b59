#pragma once
// Optional, for parity checks and debugging tools: the exact tensors a Session feeds its model.
// Unlike era/era.h this header needs LibTorch's headers (and the program must link LibTorch,
// which it does anyway through era::era).
#include <torch/script.h>

#include "era/era.h"

namespace era::debug {

// Session::prepare's result and, from the same pass, the exact vision-tower input.
struct PreparedTensors : PreparedInput {
  // float32 [crops, 3, S, S]: every image crop after normalisation, in order (`crops` are the
  // same crops before it).
  torch::Tensor pixel_values;
};

// Session::prepare with the pixel tensor kept; throws as Session::prepare.
PreparedTensors prepare(const Session& session, const Request& request);

}  // namespace era::debug
