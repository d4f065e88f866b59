#pragma once
// Internal header. Whether TorchScript's graph executor optimises a bundle's methods.
//
// The executor's default (profiling mode) runs each method's first call with profiling nodes and
// compiles an optimised graph on its second. On the CPU that graph is no faster, as no CPU fuser
// is enabled in LibTorch, while building it makes the first two requests slow. On the AMX Xeon
// VM of docs/perf/ (`era_bench --warmup 0 --repeat 2`, 7B-width bf16 model) the two requests
// took 6.8-9.6 s against 3.8-5.4 s without it, and the vision tower 2.0-5.1 s against
// 0.6-1.3 s. Later calls were the same, one module against another in one process.
// CUDA keeps the optimiser, whose fuser merges elementwise kernels there.
// LibTorch's switch is thread-local, so it is set around each call into a module
// (GraphOptimizerScope), on whatever thread the call runs on.
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <string>

namespace era {

struct ModelBundle;

enum class JitOptimize {
  kAuto,  // off on the CPU, on for CUDA
  kOn,    // LibTorch's default
  kOff,
};

JitOptimize parse_jit_optimize(const std::string& name);  // "auto", "on", "off"; throws kInvalidArgument

// The setting for a bundle on `device`.
bool optimize_graphs(JitOptimize mode, const torch::Device& device);

// Holds the bundle's setting (ModelBundle::optimize_graphs) on this thread for one call into its
// modules, and restores the previous one.
class GraphOptimizerScope {
 public:
  explicit GraphOptimizerScope(const ModelBundle& bundle);
  explicit GraphOptimizerScope(bool optimize) : guard_(optimize) {}

 private:
  torch::jit::GraphOptimizerEnabledGuard guard_;
};

}  // namespace era
