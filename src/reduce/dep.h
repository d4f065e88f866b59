#pragma once
// DEP, Dual-view Entropy Pruning (paper §3.1, Algorithm 1): picks K anchor tokens that are
// diverse in the dual view z = normalize([normalize(x); alpha*y]) and whose head distribution y is
// confident (low entropy). All maths in float32 on the tensors' device; the greedy loop's
// bookkeeping runs on the host.
#include <torch/script.h>

#include <vector>

#include "era/options.h"

namespace era {

// Per-token head saliency from the attention map A [H, N].
struct HeadEntropy {
  torch::Tensor y;           // [N, H] softmax over heads of A^T; rows sum to 1
  torch::Tensor entropy;     // [N] e = -sum_h y log(y + eps), nats, in [0, ln H]
  torch::Tensor normalized;  // [N] e^ = (e - min e) / (max e - min e + eps), in [0, 1]
};
HeadEntropy head_entropy(const torch::Tensor& attention, float epsilon);

// Rows of the dual view: normalize([normalize(x); alpha*y]) with both views, normalize(x) with
// only the visual one, normalize(y) with only the saliency one (alpha then scales nothing).
torch::Tensor dual_view(const torch::Tensor& x, const torch::Tensor& y, float alpha, bool use_x, bool use_y);

// Algorithm 1 on z [N, Dz] (float32): start at argmin `start_entropy`, then repeatedly take
// argmax over unselected j of (-m_j - eta*penalty_j), where m_j is the largest similarity z_j.z_s
// to a selected s. Only the similarity columns of selected tokens are computed (m <- max(m,
// Z z_new)), never Z Z^T: O(K N Dz). Ties go to the lowest index. Returns min(k, N) indices in
// the order they were picked (empty for k <= 0). If `columns` is given it receives the [N, K]
// float32 similarities z_i.z_s of every token to every pick, in pick order (BTR reuses them).
std::vector<int64_t> entropy_penalized_greedy(const torch::Tensor& z, const torch::Tensor& start_entropy,
                                              const torch::Tensor& penalty, float eta, int64_t k,
                                              torch::Tensor* columns = nullptr);

struct DepResult {
  std::vector<int64_t> anchors;  // ascending (original raster order)
  torch::Tensor z;               // [N, Dz] the dual view searched (BTR may match in it)
  torch::Tensor similarity;      // [N, K] z_i.z_s for every token i and anchor s (anchors ascending)
  HeadEntropy saliency;
};

// DEP for one image: x [N, D] (any float dtype), A [H, N]; k in [1, N]. Which views and which
// penalty follow `options` (use_diversity, use_saliency, alpha, eta, normalized_entropy_penalty,
// epsilon).
DepResult dual_view_entropy_pruning(const torch::Tensor& x, const torch::Tensor& attention, const EraOptions& options, int64_t k);

// Rows scaled to unit L2 norm (norms clamped at 1e-12, as torch.nn.functional.normalize).
torch::Tensor l2_normalize_rows(const torch::Tensor& t);

}  // namespace era
