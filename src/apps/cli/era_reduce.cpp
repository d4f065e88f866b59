// era_reduce: runs a reduction method on one image's tokens saved as .npy and prints what it did
// (anchors, clusters, biases, entropies) as JSON. Only flag parsing and printing live here.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/cli/common_flags.h"
#include "apps/cli/entry.h"
#include "era/error.h"
#include "reduce/btr.h"
#include "reduce/registry.h"
#include "util/npy.h"

namespace {

struct Flags {
  std::string features, saliency, method = "era", config;
  int64_t tokens = 0;
  std::vector<std::string> sets;
};

// The shortest decimal that reads back as the same float, so 0.3f prints as 0.3.
double tidy(float value) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

std::vector<double> tidy(const std::vector<float>& values) {
  std::vector<double> out;
  for (const float v : values) out.push_back(tidy(v));
  return out;
}

torch::Tensor load_matrix(const std::string& flag, const std::string& path) {
  const torch::Tensor t = era::read_npy(path);
  if (t.dim() != 2 || t.size(0) == 0 || t.size(1) == 0) {
    std::ostringstream ss;
    ss << flag << " " << path << ": expected a non-empty 2-D array, got shape " << t.sizes();
    throw era::Error(era::ErrorCode::kInvalidArgument, ss.str());
  }
  return t.to(torch::kFloat);
}

int run(const Flags& f) {
  era::ReductionRequest options;
  options.method = f.method;
  if (!f.config.empty()) options.era = era::load_era_options(f.config);
  era::cli::apply_key_values("--era-set", f.sets, options.era, era::set_era_option);
  const auto reducer = era::make_reducer(options);

  const torch::Tensor x = load_matrix("--features", f.features);
  const torch::Tensor a = load_matrix("--saliency", f.saliency);
  if (a.size(1) != x.size(0)) {
    throw era::Error(era::ErrorCode::kInvalidArgument,
                     "--saliency " + f.saliency + ": expected [H, N] with N = " + std::to_string(x.size(0)) +
                         " (the rows of --features), got " + std::to_string(a.size(1)) + " columns");
  }
  // With one feature matrix and one map, they stand for every x and every A the options could pick.
  era::ReductionInput in;
  in.embeddings = in.features = x;
  in.cls_logits = in.cls_probs = in.mean_logits = in.mean_probs = a;
  in.budget = f.tokens;
  const era::ReducedTokens r = reducer->reduce(in);

  const auto log_bias = std::vector<float>(r.log_bias.data_ptr<float>(), r.log_bias.data_ptr<float>() + r.log_bias.numel());
  std::vector<float> bias;
  for (const float lb : log_bias) bias.push_back(std::exp(lb));
  nlohmann::ordered_json j;
  j["method"] = f.method;
  j["options"] = nlohmann::ordered_json::parse(era::era_options_json(era::effective_era_options(options)));
  j["kept"] = r.kept;
  j["assignment"] = r.assignment;
  j["bias"] = tidy(bias);
  j["log_bias"] = tidy(log_bias);
  j["entropy"] = tidy(r.entropy);
  j["cluster_sizes"] = era::cluster_sizes(r.assignment, static_cast<int64_t>(r.kept.size()));
  std::cout << j.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"era_reduce: reduce one image's visual tokens (features N x D, saliency H x N) and print the result as JSON"};
  app.add_option("--features", f.features, "token features, N x D .npy (x and the tokens to merge)")->required();
  app.add_option("--saliency", f.saliency, "attention map A, H x N .npy")->required();
  app.add_option("--tokens", f.tokens, "budget K; <= 0 or >= N keeps every token")->required();
  app.add_option("--method", f.method, "full, era or era:<variant> (dep-x, dep-y, dep, dep+btr, era)")->capture_default_str();
  app.add_option("--config", f.config, "ERA options JSON (like configs/era.json)");
  app.add_option("--era-set,--set", f.sets, "override one ERA option, key=value; repeatable (--set: the old spelling)");
  return era::cli::run_tool("era_reduce", app, argc, argv, [&] { return run(f); });
}
