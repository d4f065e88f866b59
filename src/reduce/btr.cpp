#include "reduce/btr.h"

#include "era/error.h"
#include "reduce/similarity.h"

namespace era {

std::vector<int64_t> match_to_anchors(const torch::Tensor& space, const std::vector<int64_t>& anchors) {
  if (anchors.empty()) throw Error(ErrorCode::kInvalidArgument, "BTR needs at least one anchor");
  const torch::Tensor s = space.to(torch::kFloat);
  const torch::Tensor index = torch::tensor(anchors, torch::kLong).to(s.device());
  // One [N, K] product gives every token's similarity to every anchor.
  return match_by_similarity(row_dots(s, s.index_select(0, index)), anchors);
}

std::vector<int64_t> match_by_similarity(const torch::Tensor& similarity, const std::vector<int64_t>& anchors) {
  const int64_t n = similarity.size(0), k = static_cast<int64_t>(anchors.size());
  if (k == 0 || similarity.size(1) != k)
    throw Error(ErrorCode::kInvalidArgument, "BTR: one similarity column per anchor expected");
  // The argmax runs on the host.
  const torch::Tensor sims = similarity.to(torch::kCPU, torch::kFloat).contiguous();
  const float* sp = sims.data_ptr<float>();
  std::vector<int64_t> assignment(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* row = sp + i * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) best = row[j] > row[best] ? j : best;
    assignment[i] = best;
  }
  // An anchor is its own cluster even when another anchor is as similar (a duplicate token).
  for (int64_t j = 0; j < k; ++j) assignment[anchors[j]] = j;
  return assignment;
}

std::vector<int64_t> cluster_sizes(const std::vector<int64_t>& assignment, int64_t k) {
  std::vector<int64_t> sizes(static_cast<size_t>(k), 0);
  for (const int64_t slot : assignment) {
    if (slot >= 0) ++sizes[slot];
  }
  return sizes;
}

torch::Tensor cluster_centroids(const torch::Tensor& embeddings, const std::vector<int64_t>& assignment, int64_t k) {
  const auto f32 = embeddings.options().dtype(torch::kFloat);
  const torch::Tensor index = torch::tensor(assignment, torch::kLong).to(embeddings.device());
  const torch::Tensor sums = torch::zeros({k, embeddings.size(1)}, f32).index_add_(0, index, embeddings.to(torch::kFloat));
  const torch::Tensor counts = torch::tensor(cluster_sizes(assignment, k), torch::kLong).to(f32);
  return (sums / counts.unsqueeze(1)).to(embeddings.scalar_type());
}

std::vector<float> cluster_bias(const std::vector<int64_t>& assignment, const std::vector<int64_t>& anchors,
                                const torch::Tensor& normalized_entropy, float lambda) {
  const torch::Tensor e = normalized_entropy.to(torch::kCPU, torch::kFloat).contiguous();
  const float* ep = e.data_ptr<float>();
  std::vector<double> b(anchors.size(), 1.0);  // the anchor's own contribution
  std::vector<char> is_anchor(assignment.size(), 0);
  for (const int64_t a : anchors) is_anchor[a] = 1;
  for (size_t u = 0; u < assignment.size(); ++u) {
    if (is_anchor[u] || assignment[u] < 0) continue;
    const double saliency = 1.0 - static_cast<double>(ep[u]);  // low entropy = salient
    b[assignment[u]] += lambda + (1.0 - lambda) * saliency;
  }
  return std::vector<float>(b.begin(), b.end());
}

}  // namespace era
