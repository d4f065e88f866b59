#pragma once
// The fixture bundle (tests/CMakeLists.txt: fixture.bundle) opened once per test process, for the
// tests that only ask it questions. One definition for every test file: a unity build compiles
// several test files as one unit, where per-file copies of it would clash.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "era/debug.h"
#include "era/era.h"
#include "era/error.h"
#include "test_support.h"

namespace era::test {

inline Session& bundle_session() {
  static Session s = Session::open(bundle_dir());
  return s;
}

// The fixture bundle's prompt logits for the sample image and a question, opened afresh in `dtype`
// under `cpu_matmul` (SessionOptions' fields), with no reduction: the comparisons of dtypes and
// matmul modes are of the model, and a selection could differ between them. `check` sees the
// session first (e.g. what the mode set on its modules).
inline torch::Tensor prompt_logits(const std::string& dtype, const std::string& cpu_matmul,
                                   const std::function<void(Session&)>& check = {}) {
  Request r;
  r.images = {source_dir() + "/tests/data/sample.png"};
  r.prompt = "What is in the image?";
  r.reduction.method = "full";
  SessionOptions o;
  o.dtype = dtype;
  o.cpu_matmul = cpu_matmul;
  Session s = Session::open(bundle_dir(), o);
  if (check) check(s);
  return debug::prompt(s, r).logits;
}

// The message Session::open(`model`) refuses with (with `hf_weights` as SessionOptions::hf_weights),
// checked to be a kBundle refusal; "" (and a failure) where it opened.
inline std::string open_refusal(const std::string& model, const std::string& hf_weights = "") {
  SessionOptions options;
  options.hf_weights = hf_weights;
  try {
    Session::open(model, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle) << e.what();
    return e.what();
  }
  ADD_FAILURE() << model << " opened";
  return "";
}

}  // namespace era::test
