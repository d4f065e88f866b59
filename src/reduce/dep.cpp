#include "reduce/dep.h"

#include <algorithm>
#include <limits>

#include "era/error.h"
#include "reduce/similarity.h"

namespace era {

torch::Tensor l2_normalize_rows(const torch::Tensor& t) { return t / t.norm(2, {1}, true).clamp_min(1e-12); }

HeadEntropy head_entropy(const torch::Tensor& attention, float epsilon) {
  HeadEntropy h;
  h.y = torch::softmax(attention.to(torch::kFloat).t(), 1).contiguous();
  h.entropy = -(h.y * torch::log(h.y + epsilon)).sum(1);
  const auto lo = h.entropy.min(), hi = h.entropy.max();
  h.normalized = (h.entropy - lo) / (hi - lo + epsilon);
  return h;
}

torch::Tensor dual_view(const torch::Tensor& x, const torch::Tensor& y, float alpha, bool use_x, bool use_y) {
  if (!use_x && !use_y) throw Error(ErrorCode::kInvalidArgument, "DEP needs at least one view (x or y)");
  // x is normalised first: unnormalised 4096-d rows would swamp alpha*y (norm <= alpha) entirely.
  const torch::Tensor xn = use_x ? l2_normalize_rows(x.to(torch::kFloat)) : torch::Tensor();
  if (!use_y) return xn;
  const torch::Tensor yf = y.to(torch::kFloat);
  return l2_normalize_rows(use_x ? torch::cat({xn, yf * alpha}, 1) : yf);
}

std::vector<int64_t> entropy_penalized_greedy(const torch::Tensor& z, const torch::Tensor& start_entropy,
                                              const torch::Tensor& penalty, float eta, int64_t k, torch::Tensor* columns) {
  const int64_t n = z.size(0);
  k = std::min(k, n);
  if (k <= 0) return {};
  const torch::Tensor zf = z.to(torch::kFloat).contiguous();
  const torch::Tensor e = start_entropy.to(torch::kCPU, torch::kFloat).contiguous();
  const torch::Tensor p = penalty.to(torch::kCPU, torch::kFloat).contiguous();
  const float* ep = e.data_ptr<float>();
  const float* pp = p.data_ptr<float>();

  // The host keeps m (max similarity to the selection), eta*penalty and the taken flags; each step
  // costs one column of N dot products on z's device plus two passes over N floats here.
  std::vector<float> m(static_cast<size_t>(n)), eta_penalty(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) eta_penalty[i] = eta * pp[i];
  std::vector<char> taken(static_cast<size_t>(n), 0);
  std::vector<torch::Tensor> kept_columns;
  auto column_of = [&](int64_t j) {
    torch::Tensor column = row_dots(zf, zf.slice(0, j, j + 1)).to(torch::kCPU);
    if (columns) kept_columns.push_back(column);
    return column;
  };
  auto merge_column = [&](int64_t j, bool first) {
    const torch::Tensor column = column_of(j);
    const float* c = column.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) m[i] = first ? c[i] : std::max(m[i], c[i]);
  };

  int64_t start = 0;  // the most confident token; the first one on ties
  for (int64_t i = 1; i < n; ++i) start = ep[i] < ep[start] ? i : start;
  std::vector<int64_t> order{start};
  taken[start] = 1;
  if (k > 1) merge_column(start, true);
  while (static_cast<int64_t>(order.size()) < k) {
    int64_t best = -1;
    float best_score = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      if (taken[j]) continue;  // a selected token scores -inf
      const float score = -m[j] - eta_penalty[j];
      if (best < 0 || score > best_score) {  // strict: the lowest index wins ties
        best = j;
        best_score = score;
      }
    }
    order.push_back(best);
    taken[best] = 1;
    if (static_cast<int64_t>(order.size()) < k) merge_column(best, false);  // the last column is never read
  }
  if (columns) {
    if (static_cast<int64_t>(kept_columns.size()) < k) column_of(order.back());  // the last pick's, for BTR
    *columns = torch::cat(kept_columns, 1);
  }
  return order;
}

DepResult dual_view_entropy_pruning(const torch::Tensor& x, const torch::Tensor& attention, const EraOptions& options,
                                    int64_t k) {
  DepResult r;
  r.saliency = head_entropy(attention, options.epsilon);
  r.z = dual_view(x, r.saliency.y, options.alpha, options.use_diversity, options.use_saliency);
  // The entropy penalty belongs to the saliency view: DEP(x) alone is pure max-min diversity.
  const float eta = options.use_saliency ? options.eta : 0.0f;
  const auto& penalty = options.normalized_entropy_penalty ? r.saliency.normalized : r.saliency.entropy;
  torch::Tensor columns;
  r.anchors = entropy_penalized_greedy(r.z, r.saliency.entropy, penalty, eta, k, &columns);
  // Columns follow the pick order; BTR wants them in the anchors' ascending order.
  std::vector<int64_t> by_index(r.anchors.size());
  for (size_t i = 0; i < by_index.size(); ++i) by_index[i] = static_cast<int64_t>(i);
  std::sort(by_index.begin(), by_index.end(), [&](int64_t a, int64_t b) { return r.anchors[a] < r.anchors[b]; });
  r.similarity = columns.index_select(1, torch::tensor(by_index, torch::kLong));
  std::sort(r.anchors.begin(), r.anchors.end());
  return r;
}

}  // namespace era
