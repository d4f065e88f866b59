// libFuzzer's entry point for one target, chosen at compile time (tests/fuzz/CMakeLists.txt
// compiles this file once a target with -DERA_FUZZ_TARGET=<name>).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return era::fuzz::ERA_FUZZ_TARGET(data, size); }
