#include "runtime/sampler.h"

#include "era/error.h"

namespace era {

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  if (!(options.temperature >= 0.0f)) throw Error(ErrorCode::kInvalidArgument, "temperature must be >= 0");
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f)) throw Error(ErrorCode::kInvalidArgument, "top-p must be in (0, 1]");
}

int64_t Sampler::next(const torch::Tensor& logits) {
  const auto flat = logits.reshape({-1}).to(torch::kCPU, torch::kFloat);
  if (options_.temperature == 0.0f) return flat.argmax().item<int64_t>();

  // Probabilities in double so the nucleus cut-off does not depend on float summation order.
  const auto probs = torch::softmax(flat.to(torch::kDouble) / static_cast<double>(options_.temperature), 0);
  const auto sorted = probs.sort(/*dim=*/0, /*descending=*/true);
  const auto p = std::get<0>(sorted).contiguous();
  const auto idx = std::get<1>(sorted).contiguous();
  const double* pp = p.data_ptr<double>();
  const int64_t* ip = idx.data_ptr<int64_t>();
  // Keep the smallest prefix whose mass reaches top_p (at least one token).
  int64_t keep = 0;
  double mass = 0.0;
  while (keep < p.numel() && (keep == 0 || mass < options_.top_p)) mass += pp[keep++];
  const double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  double acc = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += pp[i];
    if (u < acc) return ip[i];
  }
  return ip[keep - 1];
}

}  // namespace era
