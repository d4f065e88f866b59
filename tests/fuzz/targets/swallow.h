#pragma once
// The one outcome a fuzz target forgives: era::Error, the parser's documented refusal.
#include "era/error.h"

#define ERA_FUZZ_REFUSAL_IS_FINE(...) \
  try {                               \
    __VA_ARGS__;                      \
  } catch (const era::Error&) {       \
  }                                   \
  return 0
