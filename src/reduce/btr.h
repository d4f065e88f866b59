#pragma once
// BTR, Bias-aware Token Recycling (paper §3.2): every pruned token joins its most similar anchor;
// each cluster becomes the mean of its members, and carries a bias b_k = 1 + sum of saliency
// weights of the tokens it absorbed, which LAR adds to attention logits as log b_k.
#include <torch/script.h>

#include <vector>

namespace era {

// For every token, the slot (0..K-1, in `anchors`' order) of its cluster. An anchor is its own
// cluster; a pruned token goes to the anchor with the largest dot product in `space` [N, D]
// (rows L2-normalised, so cosine), the first anchor on ties. `anchors` must be ascending.
std::vector<int64_t> match_to_anchors(const torch::Tensor& space, const std::vector<int64_t>& anchors);

// The same from precomputed similarities `similarity` [N, K] (column j = anchor anchors[j]).
std::vector<int64_t> match_by_similarity(const torch::Tensor& similarity, const std::vector<int64_t>& anchors);

// |C_k| for each slot.
std::vector<int64_t> cluster_sizes(const std::vector<int64_t>& assignment, int64_t k);

// Unweighted mean of each cluster's rows of `embeddings` [N, D] (anchor included), summed in
// float32 and returned in embeddings' dtype and device: [K, D].
torch::Tensor cluster_centroids(const torch::Tensor& embeddings, const std::vector<int64_t>& assignment, int64_t k);

// b_k = 1 + sum over absorbed (non-anchor) members u of w_u, w_u = lambda + (1 - lambda)(1 - e^_u),
// with e^ the min-max normalised entropy [N]. 1 <= b_k <= |C_k|; lambda = 1 gives |C_k|.
std::vector<float> cluster_bias(const std::vector<int64_t>& assignment, const std::vector<int64_t>& anchors,
                                const torch::Tensor& normalized_entropy, float lambda);

}  // namespace era
