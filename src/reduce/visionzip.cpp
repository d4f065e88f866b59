#include "reduce/visionzip.h"
#include "reduce/budget.h"

#include <algorithm>
#include <cmath>

#include "era/error.h"

namespace era {

VisionZipSplit visionzip_split(int64_t budget, double contextual_fraction) {
  VisionZipSplit s;
  s.contextual = std::min<int64_t>(std::llround(static_cast<double>(budget) * contextual_fraction), budget - 1);
  s.contextual = std::max<int64_t>(s.contextual, 0);
  s.dominant = budget - s.contextual;
  return s;
}

ReducedTokens VisionZipReducer::reduce(const ReductionInput& input) const {
  const int64_t n = input.embeddings.size(0);
  if (keeps_all(input.budget, n)) return FullReducer().reduce(input);
  if (!input.cls_feature.defined() || !input.mean_keys.defined()) {
    throw Error(ErrorCode::kBundle,
                "visionzip needs the vision module's CLS feature and head-mean keys, which this bundle does not export: "
                "re-export it with this version of tools/export_llava.py");
  }
  if (!input.project) throw Error(ErrorCode::kInvalidArgument, "visionzip needs the projector (ReductionInput::project)");
  if (!input.cls_probs.defined() || input.cls_probs.dim() != 2 || input.cls_probs.size(1) != n || input.mean_keys.dim() != 2 ||
      input.mean_keys.size(0) != n + 1 || input.features.size(0) != n) {
    throw Error(ErrorCode::kInvalidArgument,
                "visionzip: cls_probs [H, N], features [N, C] and mean_keys [N+1, hd] must match N = " + std::to_string(n));
  }
  const VisionZipSplit split = visionzip_split(input.budget, contextual_fraction_);
  const int64_t top = split.dominant - 1;

  // Dominant patches: stable descending sort gives first-index ties.
  const torch::Tensor score = input.cls_probs.to(torch::kFloat).sum(0).cpu();
  const torch::Tensor by_score = std::get<1>(torch::sort(score, /*stable=*/true, /*dim=*/0, /*descending=*/true));
  const auto* order = by_score.data_ptr<int64_t>();
  std::vector<int64_t> dominant(order, order + top);
  std::sort(dominant.begin(), dominant.end());
  std::vector<bool> is_dominant(static_cast<size_t>(n), false);
  for (int64_t p : dominant) is_dominant[static_cast<size_t>(p)] = true;
  std::vector<int64_t> rest;
  for (int64_t p = 0; p < n; ++p) {
    if (!is_dominant[static_cast<size_t>(p)]) rest.push_back(p);
  }
  const auto m = static_cast<int64_t>(rest.size());
  const int64_t c = std::min(split.contextual, m);

  ReducedTokens out;
  out.assignment.assign(static_cast<size_t>(n), -1);
  out.kept.push_back(order[0]);  // the CLS token's anchor
  out.off_grid.push_back(true);
  for (size_t i = 0; i < dominant.size(); ++i) {
    out.kept.push_back(dominant[i]);
    out.off_grid.push_back(false);
    out.assignment[static_cast<size_t>(dominant[i])] = static_cast<int64_t>(i) + 1;
  }

  const torch::Tensor feats = input.features.to(torch::kFloat);
  const auto device = feats.device();
  auto index = [&](const std::vector<int64_t>& v) {
    return torch::tensor(v, torch::TensorOptions().dtype(torch::kLong)).to(device);
  };
  std::vector<torch::Tensor> tokens = {input.cls_feature.to(torch::kFloat).reshape({1, -1}),
                                       feats.index_select(0, index(dominant))};

  if (c > 0) {
    const int64_t step = std::max<int64_t>(1, m / c);
    std::vector<int64_t> targets, others;  // positions within `rest`
    for (int64_t i = 0; i < m; ++i) {
      if (i % step == 0 && i / step < c) {
        targets.push_back(i);
      } else {
        others.push_back(i);
      }
    }
    const int64_t first_slot = split.dominant;
    std::vector<int64_t> target_patch, other_patch;
    for (int64_t t : targets) target_patch.push_back(rest[static_cast<size_t>(t)]);
    for (int64_t o : others) other_patch.push_back(rest[static_cast<size_t>(o)]);
    for (size_t j = 0; j < target_patch.size(); ++j) {
      out.kept.push_back(target_patch[j]);
      out.off_grid.push_back(true);
      out.assignment[static_cast<size_t>(target_patch[j])] = first_slot + static_cast<int64_t>(j);
    }
    torch::Tensor merged = feats.index_select(0, index(target_patch));  // [c, C]
    if (!others.empty()) {
      auto keys_of = [&](const std::vector<int64_t>& patches) {  // mean_keys row = patch + 1 (CLS first)
        std::vector<int64_t> rows;
        for (int64_t p : patches) rows.push_back(p + 1);
        const torch::Tensor k = input.mean_keys.to(torch::kFloat).index_select(0, index(rows).to(input.mean_keys.device()));
        return k / k.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12);
      };
      const torch::Tensor sim = torch::matmul(keys_of(other_patch), keys_of(target_patch).t());  // [M - c, c]
      const torch::Tensor assign = sim.argmax(1).to(device);
      const torch::Tensor sums = torch::zeros_like(merged).index_add_(0, assign, feats.index_select(0, index(other_patch)));
      const torch::Tensor counts =
          torch::zeros({c}, feats.options())
              .index_add_(0, assign, torch::ones({static_cast<int64_t>(others.size())}, feats.options()));
      merged = merged + sums / counts.clamp_min(1.0).unsqueeze(1);  // + 0 where nothing was assigned
      const torch::Tensor assign_cpu = assign.cpu();
      const auto* a = assign_cpu.data_ptr<int64_t>();
      for (size_t i = 0; i < other_patch.size(); ++i) out.assignment[static_cast<size_t>(other_patch[i])] = first_slot + a[i];
    }
    tokens.push_back(merged);
  }
  const torch::Tensor vision_tokens = torch::cat(tokens, 0).to(input.features.scalar_type());
  out.embeddings = input.project(vision_tokens).to(input.embeddings.scalar_type());
  out.log_bias = torch::zeros({static_cast<int64_t>(out.kept.size())},
                              torch::TensorOptions().dtype(torch::kFloat).device(input.embeddings.device()));
  return out;
}

}  // namespace era
