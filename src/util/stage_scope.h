#pragma once
// Internal: a named span of the pipeline (vision, reduce, prefill, decode) in LibTorch's profiler,
// so a per-operator profile (bench/op_profile.h) can say which stage each operator ran in. A user
// scope of LibTorch's RecordFunction: a flag check when no profiler is on.
#include <ATen/record_function.h>

// Names start with "era::" (bench/op_profile.cpp strips the prefix).
#define ERA_STAGE_SCOPE(name) RECORD_USER_SCOPE(name)
