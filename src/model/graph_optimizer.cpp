#include "model/graph_optimizer.h"

#include "era/error.h"
#include "model/bundle.h"

namespace era {

JitOptimize parse_jit_optimize(const std::string& name) {
  if (name == "auto") return JitOptimize::kAuto;
  if (name == "on") return JitOptimize::kOn;
  if (name == "off") return JitOptimize::kOff;
  throw Error(ErrorCode::kInvalidArgument, "jit_optimize '" + name + "' is not one of auto, on, off");
}

bool optimize_graphs(JitOptimize mode, const torch::Device& device) {
  if (mode == JitOptimize::kAuto) return !device.is_cpu();
  return mode == JitOptimize::kOn;
}

GraphOptimizerScope::GraphOptimizerScope(const ModelBundle& bundle) : guard_(bundle.optimize_graphs) {}

}  // namespace era
