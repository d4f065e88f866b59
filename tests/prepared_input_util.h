#pragma once
// PreparedInput with the exact pixel tensor beside it (era/debug.h), for tests that compare what
// the vision tower gets.
#include <torch/script.h>

#include <cstring>

#include "era/debug.h"
#include "era/era.h"

namespace era::test {

struct PreparedWithPixels : PreparedInput {
  torch::Tensor pixel_values;  // float32 [crops, 3, S, S]
};

inline PreparedWithPixels prepare_with_pixels(const Session& session, const Request& request) {
  PreparedWithPixels p;
  static_cast<PreparedInput&>(p) = session.prepare(request);
  p.pixel_values = debug::pixel_values(session, request);
  return p;
}

// Byte-identical crops (the uint8 RGB images before normalisation).
inline bool same_crops(const PreparedInput& a, const PreparedInput& b) {
  if (a.crops.size() != b.crops.size()) return false;
  for (size_t i = 0; i < a.crops.size(); ++i) {
    const Image &x = a.crops[i], &y = b.crops[i];
    if (x.width() != y.width() || x.height() != y.height() || x.size_bytes() != y.size_bytes()) return false;
    if (std::memcmp(x.data(), y.data(), x.size_bytes()) != 0) return false;
  }
  return true;
}

}  // namespace era::test
