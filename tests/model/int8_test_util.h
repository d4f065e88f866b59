#pragma once
// Shared by the tests of int8 bundles (model/int8_weights.h and era_bench's report of them).
#include <cstdint>
#include <string>

#include "model/manifest.h"
#include "test_support.h"

namespace era::test {

// The tiny checkpoint exported with int8 decoder weights (fixture.int8_bundle): the default
// "weight-only" scheme (model/int8_linear.h).
inline std::string int8_bundle_dir() { return testdata_dir() + "/bundle-int8"; }

// The same with --int8-scheme dynamic (fixture.int8_dynamic_bundle): LibTorch's quantised
// linears (model/int8_weights.h).
inline std::string int8_dynamic_bundle_dir() { return testdata_dir() + "/bundle-int8-dynamic"; }

// Bytes of the decoder's int8 weights, one per weight: q/k/v/o and gate/up/down per layer, and
// the LM head.
inline int64_t decoder_int8_weight_bytes(const Manifest& m) {
  const int64_t h = m.text.hidden_size, f = m.text.intermediate_size;
  const int64_t q = m.text.num_heads * m.text.head_dim, kv = m.text.num_kv_heads * m.text.head_dim;
  return m.text.num_layers * (h * q + 2 * h * kv + q * h + 3 * h * f) + h * m.text.vocab_size;
}

}  // namespace era::test
