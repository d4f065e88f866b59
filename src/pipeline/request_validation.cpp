// era::validate_request (era/era.h): the one set of request checks, used by Session and by the
// batch tools before any work.
#include "era/era.h"
#include "era/error.h"
#include "reduce/registry.h"

namespace era {

void validate_request(const Request& r) {
  const auto bad = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, what); };
  if (r.max_new_tokens < 0) bad("max_new_tokens must be >= 0");
  if (!(r.temperature >= 0.0f)) bad("temperature must be >= 0");
  if (!(r.top_p > 0.0f && r.top_p <= 1.0f)) bad("top-p must be in (0, 1]");
  if (r.reduction.tokens < 0) bad("tokens must be >= 0");
  if (!(r.reduction.keep_ratio >= 0.0f && r.reduction.keep_ratio <= 1.0f)) bad("keep ratio must be in [0, 1]");
  if (r.reduction.scope != "crop" && r.reduction.scope != "image") {
    bad("budget scope must be 'crop' or 'image', not '" + r.reduction.scope + "'");
  }
  find_method(r.reduction.method);  // throws for an unknown method, listing the known ones
  validate_era_options(effective_era_options(r.reduction));
  validate_baseline_options(r.reduction.baselines);
}

}  // namespace era
