// era::validate_request (era/era.h): the one set of request checks, used by Session and by the
// batch tools before any work.
#include "pipeline/request_validation.h"
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
  if (r.reduction.positions != "original" && r.reduction.positions != "compact") {
    bad("positions must be 'original' or 'compact', not '" + r.reduction.positions + "'");
  }
  if (r.min_pixels < 0 || r.max_pixels < 0) bad("min_pixels and max_pixels must be >= 0 (0: the bundle's)");
  if (r.min_pixels > 0 && r.max_pixels > 0 && r.min_pixels > r.max_pixels) {
    bad("min_pixels " + std::to_string(r.min_pixels) + " is above max_pixels " + std::to_string(r.max_pixels));
  }
  if (!r.use_template && (!r.history.empty() || r.system)) {
    bad("a conversation (history or system text) needs use_template: the template lays out its turns");
  }
  find_method(r.reduction.method);  // throws for an unknown method, listing the known ones
  // A reduction without a budget would keep every token while calling itself "era": refuse it
  // rather than answer as "full" under another name.
  if (!is_unreduced_method(r.reduction.method) && r.reduction.tokens == 0 && r.reduction.keep_ratio == 0.0f) {
    bad("method '" + r.reduction.method +
        "' needs a budget: tokens (--tokens K) or keep ratio (--keep-ratio R); "
        "'full' keeps every token");
  }
  validate_era_options(effective_era_options(r.reduction));
  validate_baseline_options(r.reduction.baselines);
}

void validate_request(const Request& r, int64_t max_context) {
  validate_request(r);
  if (r.max_new_tokens >= max_context) {
    throw Error(ErrorCode::kInvalidArgument, "max_new_tokens " + std::to_string(r.max_new_tokens) +
                                                 " is not below the model's context of " + std::to_string(max_context) +
                                                 " tokens");
  }
}

void validate_request(const Request& r, const ModelInfo& model) { validate_request(r, model.max_context); }

}  // namespace era
