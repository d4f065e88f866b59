#include "util/npy.h"
#include "fuzz_targets.h"
#include "targets/swallow.h"

int era::fuzz::npy(const uint8_t* data, size_t size) { ERA_FUZZ_REFUSAL_IS_FINE(era::parse_npy(data, size, "<fuzz>.npy")); }
