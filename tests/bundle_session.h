#pragma once
// The fixture bundle (tests/CMakeLists.txt: fixture.bundle) opened once per test process, for the
// tests that only ask it questions. One definition for every test file: a unity build compiles
// several test files as one unit, where per-file copies of it would clash.
#include "era/era.h"
#include "test_support.h"

namespace era::test {

inline Session& bundle_session() {
  static Session s = Session::open(bundle_dir());
  return s;
}

}  // namespace era::test
