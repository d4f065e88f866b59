#include "reduce/era_reducer.h"
#include "reduce/budget.h"

#include <sstream>
#include <utility>

#include "era/error.h"
#include "reduce/btr.h"
#include "reduce/dep.h"

namespace era {
namespace {

std::string shape_of(const torch::Tensor& t) {
  if (!t.defined()) return "nothing";
  std::ostringstream ss;
  ss << t.sizes();
  return ss.str();
}

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, "ERA: " + message); }

// A: the CLS row or the mean over patch-query rows, as logits or probabilities.
std::pair<const torch::Tensor*, const char*> saliency_map(const ReductionInput& in, const EraOptions& o) {
  const bool cls = o.readout == SaliencyReadout::kCls, logits = o.saliency_source == SaliencySource::kLogits;
  if (cls) return logits ? std::make_pair(&in.cls_logits, "cls_logits") : std::make_pair(&in.cls_probs, "cls_probs");
  return logits ? std::make_pair(&in.mean_logits, "mean_logits") : std::make_pair(&in.mean_probs, "mean_probs");
}

void check_finite(const torch::Tensor& t, const char* name) {
  if (!torch::isfinite(t).all().item<bool>()) fail(std::string(name) + " has NaN or infinite values");
}

std::vector<float> to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU, torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// BTR's [N, K] token-anchor cosines, reusing DEP's z-space columns instead of a second
// O(N K D) product. z_i = [x^_i; alpha y_i] / n_i with n_i = ||[x^_i; alpha y_i]||, so
// x^_i . x^_s = n_i n_s (z_i . z_s) - alpha^2 (y_i . y_s): the correction costs O(N K H). Only
// called when z contains x.
torch::Tensor anchor_similarity(const DepResult& dep, const torch::Tensor& x, const EraOptions& o) {
  if (o.match_space == MatchSpace::kZ || !o.use_saliency) return dep.similarity;  // z is the space (z = x^)
  const torch::Tensor index = torch::tensor(dep.anchors, torch::kLong).to(dep.similarity.device());
  const torch::Tensor xn = l2_normalize_rows(x.to(torch::kFloat));
  const torch::Tensor y = dep.saliency.y.to(xn.device());
  const torch::Tensor norms = torch::cat({xn, y * o.alpha}, 1).norm(2, {1}).clamp_min(1e-12).to(dep.similarity.device());
  const torch::Tensor ya = y.to(dep.similarity.device());
  return dep.similarity * norms.unsqueeze(1) * norms.index_select(0, index).unsqueeze(0) -
         (o.alpha * o.alpha) * ya.mm(ya.index_select(0, index).t());
}

}  // namespace

EraReducer::EraReducer(EraOptions options, std::string name) : options_(options), name_(std::move(name)) {
  validate_era_options(options_);
}

ReducedTokens EraReducer::reduce(const ReductionInput& in) const {
  const torch::Tensor& embeddings = in.embeddings;
  if (!embeddings.defined() || embeddings.dim() != 2 || embeddings.size(0) == 0) {
    fail("embeddings must be [N, D] with N > 0, got " + shape_of(embeddings));
  }
  const int64_t n = embeddings.size(0);
  const auto [a_ptr, a_name] = saliency_map(in, options_);
  const torch::Tensor& a = *a_ptr;
  if (a.defined() && (a.dim() != 2 || a.size(0) < 1 || a.size(1) != n)) {
    fail(std::string(a_name) + " must be [H, N] with N = " + std::to_string(n) + ", got " + shape_of(a));
  }
  if (a.defined()) check_finite(a, a_name);

  const bool keep_all = keeps_all(in.budget, n);
  if (keep_all) {  // nothing to reduce; the entropy is still worth reporting
    ReducedTokens out = FullReducer().reduce(in);
    if (a.defined()) out.entropy = to_vector(head_entropy(a, options_.epsilon).entropy);
    return out;
  }
  if (!a.defined()) fail(std::string("the saliency map ") + a_name + " is missing");
  const bool projected = options_.feature_space == FeatureSpace::kProjected;
  const torch::Tensor& x = projected ? embeddings : in.features;
  const char* x_name = projected ? "embeddings" : "features";
  if (!x.defined() || x.dim() != 2 || x.size(0) != n) {
    fail(std::string(x_name) + " must be [N, C] with N = " + std::to_string(n) + ", got " + shape_of(x));
  }
  check_finite(x, x_name);

  const int64_t k = in.budget;
  const DepResult dep = dual_view_entropy_pruning(x, a, options_, k);
  ReducedTokens out;
  out.kept = dep.anchors;
  out.entropy = to_vector(dep.saliency.entropy);
  std::vector<float> bias(static_cast<size_t>(k), 1.0f);
  if (options_.recycle) {
    // With the visual view out of z (DEP(y) alone) DEP's columns hold no x: match on x directly.
    out.assignment = options_.match_space == MatchSpace::kX && !options_.use_diversity
                         ? match_to_anchors(l2_normalize_rows(x.to(torch::kFloat)), dep.anchors)
                         : match_by_similarity(anchor_similarity(dep, x, options_), dep.anchors);
    // Centroids are always of the projected embeddings: they are what the decoder reads.
    out.embeddings = cluster_centroids(embeddings, out.assignment, k);
    bias = cluster_bias(out.assignment, dep.anchors, dep.saliency.normalized, options_.lambda);
  } else {
    out.assignment.assign(static_cast<size_t>(n), -1);
    for (int64_t j = 0; j < k; ++j) out.assignment[dep.anchors[j]] = j;
    out.embeddings = embeddings.index_select(0, torch::tensor(dep.anchors, torch::kLong).to(embeddings.device()));
  }
  // Without LAR the decoder sees plain keys: bias 0 whatever BTR estimated.
  torch::Tensor log_bias = torch::tensor(bias, torch::kFloat).log();
  if (!options_.rectify) log_bias.zero_();
  out.log_bias = log_bias.to(embeddings.device());
  return out;
}

}  // namespace era
