// era_reduce end to end on small .npy inputs: the JSON describes the reduction, the method, config
// and --set flags reach the reducer, and bad inputs give one error line and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "test_support.h"
#include "util/npy.h"

namespace era {
namespace {

struct Inputs {
  std::string dir, features, saliency;
};

Inputs write_inputs(const std::string& name, int64_t n = 24, int64_t d = 6, int64_t h = 4) {
  Inputs in;
  in.dir = test::scratch_dir("era_reduce_" + name);
  in.features = in.dir + "/features.npy";
  in.saliency = in.dir + "/saliency.npy";
  torch::manual_seed(1);
  write_npy(in.features, torch::randn({n, d}));
  write_npy(in.saliency, torch::randn({h, n}) * 3);
  return in;
}

test::CommandResult reduce(const Inputs& in, const std::string& args) {
  return test::run_command(test::era_reduce_path() + " --features " + in.features + " --saliency " + in.saliency + " " + args);
}

void expect_reduce_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("era_reduce: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

TEST(EraReduceCli, PrintsTheReductionAsJson) {
  const auto in = write_inputs("json");
  const auto r = reduce(in, "--tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["method"], "era");
  EXPECT_EQ(j["options"]["lambda"], 0.3);
  const auto kept = j["kept"].get<std::vector<int64_t>>();
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
  const auto assignment = j["assignment"].get<std::vector<int64_t>>();
  ASSERT_EQ(assignment.size(), 24u);
  for (size_t s = 0; s < kept.size(); ++s) EXPECT_EQ(assignment[kept[s]], static_cast<int64_t>(s));
  const auto sizes = j["cluster_sizes"].get<std::vector<int64_t>>();
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), 24);
  for (size_t s = 0; s < kept.size(); ++s) {
    EXPECT_EQ(std::count(assignment.begin(), assignment.end(), static_cast<int64_t>(s)), sizes[s]);
    const double b = j["bias"][s], log_b = j["log_bias"][s];
    EXPECT_GE(b, 1.0);
    EXPECT_LE(b, sizes[s] + 1e-6);
    EXPECT_NEAR(std::log(b), log_b, 1e-6);
  }
  EXPECT_EQ(j["entropy"].size(), 24u);
  for (const double e : j["entropy"]) EXPECT_LE(e, std::log(4.0) + 1e-6);
}

TEST(EraReduceCli, MethodConfigAndSetReachTheReducer) {
  const auto in = write_inputs("flags");
  const auto dep = nlohmann::json::parse(reduce(in, "--tokens 5 --method era:dep").out);
  EXPECT_EQ(dep["method"], "era:dep");
  EXPECT_EQ(dep["options"]["recycle"], false);
  EXPECT_EQ(std::count(dep["assignment"].begin(), dep["assignment"].end(), -1), 19);
  EXPECT_EQ(dep["log_bias"], std::vector<double>(5, 0.0));
  EXPECT_EQ(dep["bias"], std::vector<double>(5, 1.0));

  const auto config = in.dir + "/era.json";
  std::ofstream(config) << R"({"lambda": 1.0, "eta": 0.5})";
  const auto j = nlohmann::json::parse(reduce(in, "--tokens 5 --config " + config + " --set alpha=2 --set rectify=true").out);
  EXPECT_EQ(j["options"]["lambda"], 1.0);
  EXPECT_EQ(j["options"]["eta"], 0.5);
  EXPECT_EQ(j["options"]["alpha"], 2.0);
  ASSERT_EQ(j["bias"].size(), j["cluster_sizes"].size());
  for (size_t s = 0; s < j["bias"].size(); ++s) {  // lambda = 1: b_k = |C_k| (printed as exp(log b_k))
    EXPECT_NEAR(j["bias"][s].get<double>(), j["cluster_sizes"][s].get<double>(), 1e-5);
  }

  const auto all = nlohmann::json::parse(reduce(in, "--tokens 0").out);
  EXPECT_EQ(all["kept"].size(), 24u);
  EXPECT_EQ(all["cluster_sizes"], std::vector<int64_t>(24, 1));
}

TEST(EraReduceCli, BadInputsGiveOneErrorLine) {
  const auto in = write_inputs("errors");
  auto missing = in;
  missing.features = in.dir + "/nope.npy";
  expect_reduce_error(reduce(missing, "--tokens 3"), "nope.npy");
  auto garbage = in;
  garbage.saliency = in.dir + "/garbage.npy";
  std::ofstream(garbage.saliency) << "not an npy file";
  expect_reduce_error(reduce(garbage, "--tokens 3"), "garbage.npy");
  auto mismatched = in;
  mismatched.saliency = in.dir + "/wrong.npy";
  write_npy(mismatched.saliency, torch::randn({4, 23}));
  expect_reduce_error(reduce(mismatched, "--tokens 3"), "wrong.npy");
  auto flat = in;
  flat.features = in.dir + "/flat.npy";
  write_npy(flat.features, torch::randn({24}));
  expect_reduce_error(reduce(flat, "--tokens 3"), "flat.npy");
  auto nan = in;
  nan.features = in.dir + "/nan.npy";
  write_npy(nan.features, torch::full({24, 6}, NAN));
  expect_reduce_error(reduce(nan, "--tokens 3"), "NaN");
  expect_reduce_error(reduce(in, "--tokens 3 --method era:lar"), "era:lar");
  expect_reduce_error(reduce(in, "--tokens 3 --set gamma=1"), "--era-set: ERA option gamma=1: unknown option 'gamma'");
  expect_reduce_error(reduce(in, "--tokens 3 --era-set alpha=x"), "--era-set: ERA option alpha=x");
  expect_reduce_error(reduce(in, "--tokens 3 --config " + in.dir + "/none.json"), "none.json");
}

}  // namespace
}  // namespace era
