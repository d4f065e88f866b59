// TorchScript's graph optimiser per bundle (model/graph_optimizer.h): the policy per device, the
// session option reaching the bundle, and the switch in effect during calls into the modules,
// seen in the graph LibTorch last ran: with the optimiser on, a method's first call runs its
// profiling graph (prim::profile nodes); with it off, the plain graph.
#include <gtest/gtest.h>

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "era/era.h"
#include "model/bundle.h"
#include "model/decoder.h"
#include "model/graph_optimizer.h"
#include "model/vision_encoder.h"
#include "pipeline/session_internals.h"
#include "test_support.h"

namespace era {
namespace {

int profile_nodes_in_last_graph() {
  const std::shared_ptr<torch::jit::Graph> g = torch::jit::lastExecutedOptimizedGraph();
  if (!g) return -1;
  int n = 0;
  for (const torch::jit::Node* node : g->nodes()) n += node->kind() == torch::jit::prim::profile;
  return n;
}

TEST(GraphOptimizer, ParsesTheModesAndNamesABadOne) {
  EXPECT_EQ(parse_jit_optimize("auto"), JitOptimize::kAuto);
  EXPECT_EQ(parse_jit_optimize("on"), JitOptimize::kOn);
  EXPECT_EQ(parse_jit_optimize("off"), JitOptimize::kOff);
  test::expect_invalid_argument([] { parse_jit_optimize("fast"); }, "jit_optimize 'fast'");
  SessionOptions o;
  o.jit_optimize = "maybe";
  test::expect_invalid_argument([&] { Session::open(test::bundle_dir(), o); }, "jit_optimize 'maybe'");
}

TEST(GraphOptimizer, AutoIsOffOnTheCpuAndOnForCuda) {
  EXPECT_FALSE(optimize_graphs(JitOptimize::kAuto, torch::Device(torch::kCPU)));
  EXPECT_TRUE(optimize_graphs(JitOptimize::kAuto, torch::Device(torch::kCUDA, 0)));
  EXPECT_TRUE(optimize_graphs(JitOptimize::kOn, torch::Device(torch::kCPU)));
  EXPECT_FALSE(optimize_graphs(JitOptimize::kOff, torch::Device(torch::kCUDA, 0)));
  for (const char* mode : {"auto", "on", "off"}) {
    SessionOptions o;
    o.jit_optimize = mode;
    Session s = Session::open(test::bundle_dir(), o);
    EXPECT_EQ(SessionAccess::state(s).bundle.optimize_graphs, std::string(mode) == "on") << mode;
  }
}

TEST(GraphOptimizer, EachCallRunsUnderTheBundlesSettingAndRestoresTheThreads) {
  for (const bool optimize : {true, false}) {
    ModelBundle b = load_bundle(test::bundle_dir(), torch::Device(torch::kCPU));
    b.optimize_graphs = optimize;
    const bool caller_setting = torch::jit::getGraphExecutorOptimize();
    Decoder decoder(b);
    decoder.embed(torch::tensor({{1, 2, 3}}));  // the method's first call
    EXPECT_EQ(profile_nodes_in_last_graph() > 0, optimize) << "decoder.embed, optimize " << optimize;
    const int64_t s = b.manifest.vision.image_size;
    VisionEncoder(b).encode(torch::rand({1, 3, s, s}));  // its last call: the projector's first
    EXPECT_EQ(profile_nodes_in_last_graph() > 0, optimize) << "projector, optimize " << optimize;
    EXPECT_EQ(torch::jit::getGraphExecutorOptimize(), caller_setting);
  }
}

}  // namespace
}  // namespace era
