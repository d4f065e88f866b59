#include "reduce/budget.h"

#include <algorithm>
#include <cmath>

namespace era {

int64_t resolve_budget(const ReductionRequest& r, int64_t n, int64_t nominal) {
  if (r.tokens > 0) return std::min(std::max<int64_t>(nominal, 1), n);
  if (r.keep_ratio > 0.0f) return std::max<int64_t>(1, std::llround(static_cast<double>(r.keep_ratio) * n));
  return n;
}

}  // namespace era
