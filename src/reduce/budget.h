#pragma once
// How many tokens a budget keeps. One rule everywhere: a budget <= 0, or one that reaches the
// token count, keeps every token.
#include <cstdint>

#include "era/methods.h"

namespace era {

// True when `budget` keeps all of `n` tokens (budget <= 0 or budget >= n).
inline bool keeps_all(int64_t budget, int64_t n) { return budget <= 0 || budget >= n; }

// `budget` resolved against `n` tokens: n when it keeps all, else budget.
inline int64_t effective_budget(int64_t budget, int64_t n) { return keeps_all(budget, n) ? n : budget; }

// The tokens a request keeps out of `n`: `nominal` (its `tokens`, scaled to this unit by the
// caller: NeXT's per-crop share) clamped to [1, n]; else keep_ratio * n (at least 1); else n.
int64_t resolve_budget(const ReductionRequest& request, int64_t n, int64_t nominal);

}  // namespace era
