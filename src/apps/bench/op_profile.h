#pragma once
// Internal (era_bench): where a request's CPU time goes, operator by operator. LibTorch's legacy
// profiler (both routes have it: LibTorch 1.13 and 2.x) records every aten / TorchScript operator
// the calling thread runs; each operator's *self* time (its children's excluded) is summed by name
// and by the pipeline stage it ran in, the innermost enclosing stage scope (util/stage_scope.h).
//
// Timings are wall-clock on the calling thread: an operator parallelised over intra-op threads
// counts its wall time once. The profiler adds a few microseconds per operator, so profile a run
// of its own, never a timed one.
#include <cstdint>
#include <string>
#include <vector>

namespace era::bench {

struct OpStat {
  std::string stage;  // "vision", "reduce", "prefill", "decode", ... ; "other" outside every stage
  std::string op;     // "aten::addmm", ...
  int64_t calls = 0;
  double self_ms = 0;
};

struct StageTime {
  std::string stage;
  int64_t calls = 0;
  double ms = 0;  // inclusive wall time of the stage's scopes
};

struct OpProfile {
  std::vector<OpStat> ops;        // by stage, then self time descending
  std::vector<StageTime> stages;  // in order of first appearance
};

// Profiles the calling thread from construction to stop() (or destruction).
class OpProfiler {
 public:
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  OpProfile stop();

 private:
  bool running_ = false;
};

// The `top` operators of each stage as a text table (self ms, calls, share of the stage).
std::string format_op_profile(const OpProfile& profile, int top);

}  // namespace era::bench
