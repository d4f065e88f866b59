#pragma once
// Internal: a named span of the pipeline (vision, reduce, prefill, decode) in LibTorch's profiler,
// so a per-operator profile (bench/op_profile.h) can say which stage each operator ran in. A user
// scope of LibTorch's RecordFunction: a flag check when no profiler is on.
#include <ATen/record_function.h>

// `name`: a string literal, the stage ("vision"). The scope is named "era-stage:" + name, a prefix
// no operator has: bench/op_profile.cpp tells stages from operators by it (the bundle's own
// operators are named "era::gemv", "era::onednn_linear", ...).
#define ERA_STAGE_SCOPE(name) RECORD_USER_SCOPE("era-stage:" name)
