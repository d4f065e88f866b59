#include "apps/bench/op_profile.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace era::bench {
namespace {

namespace prof = torch::autograd::profiler;

constexpr const char* kStagePrefix = "era-stage:";  // util/stage_scope.h

struct Open {
  const prof::LegacyEvent* push;
  double children_us = 0;
  std::string stage;  // the stage this range runs in (itself, if it is a stage scope)
};

bool is_stage(const std::string& name) { return name.rfind(kStagePrefix, 0) == 0; }

}  // namespace

OpProfiler::OpProfiler() {
  prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  running_ = true;
}

OpProfiler::~OpProfiler() {
  if (running_) {
    try {
      prof::disableProfilerLegacy();
    } catch (...) {  // a destructor must not throw; the profile is lost either way
    }
  }
}

OpProfile OpProfiler::stop() {
  running_ = false;
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  std::map<std::pair<std::string, std::string>, OpStat> by_op;
  std::map<std::string, StageTime> by_stage;
  std::vector<std::string> stage_order;
  for (const auto& events : lists) {
    std::vector<Open> stack;
    for (const prof::LegacyEvent& e : events) {
      if (e.kind() == prof::EventKind::PushRange) {
        const std::string name = e.name();
        const std::string outer = stack.empty() ? "other" : stack.back().stage;
        stack.push_back({&e, 0, is_stage(name) ? name.substr(std::char_traits<char>::length(kStagePrefix)) : outer});
      } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
        const Open open = stack.back();
        stack.pop_back();
        const double us = open.push->cpuElapsedUs(e);
        if (!stack.empty()) stack.back().children_us += us;
        const std::string name = open.push->name();
        if (is_stage(name)) {
          auto [it, added] = by_stage.try_emplace(open.stage, StageTime{open.stage, 0, 0});
          if (added) stage_order.push_back(open.stage);
          it->second.calls += 1;
          it->second.ms += us / 1000.0;
          continue;  // a stage's own time (between its operators) is not an operator's
        }
        OpStat& s = by_op[{open.stage, name}];
        s.stage = open.stage;
        s.op = name;
        s.calls += 1;
        s.self_ms += std::max(0.0, us - open.children_us) / 1000.0;
      }
    }
  }
  OpProfile out;
  for (const auto& stage : stage_order) out.stages.push_back(by_stage[stage]);
  for (auto& [key, s] : by_op) out.ops.push_back(std::move(s));
  const auto rank = [&](const std::string& stage) {
    const auto it = std::find(stage_order.begin(), stage_order.end(), stage);
    return static_cast<size_t>(it - stage_order.begin());  // "other" (not a stage) last
  };
  std::sort(out.ops.begin(), out.ops.end(), [&](const OpStat& a, const OpStat& b) {
    if (a.stage != b.stage) return rank(a.stage) < rank(b.stage) || (rank(a.stage) == rank(b.stage) && a.stage < b.stage);
    return a.self_ms > b.self_ms;
  });
  return out;
}

std::string format_op_profile(const OpProfile& profile, int top) {
  std::ostringstream os;
  char line[256];
  std::map<std::string, double> stage_ms, op_ms;
  for (const auto& s : profile.stages) stage_ms[s.stage] = s.ms;
  for (const auto& o : profile.ops) op_ms[o.stage] += o.self_ms;
  std::snprintf(line, sizeof line, "%-10s %-36s %8s %10s %8s\n", "stage", "operator (self time)", "calls", "ms", "% stage");
  os << line;
  std::string current;
  int shown = 0;
  for (const auto& o : profile.ops) {
    if (o.stage != current) {
      current = o.stage;
      shown = 0;
      const double total = stage_ms.count(current) ? stage_ms[current] : op_ms[current];
      std::snprintf(line, sizeof line, "%-10s %-36s %8s %10.2f %8s\n", current.c_str(), "(all)", "", total, "100%");
      os << line;
    }
    if (shown++ >= top) continue;
    const double total = stage_ms.count(current) ? stage_ms[current] : op_ms[current];
    std::snprintf(line, sizeof line, "%-10s %-36.36s %8lld %10.2f %7.1f%%\n", "", o.op.c_str(), static_cast<long long>(o.calls),
                  o.self_ms, total > 0 ? 100.0 * o.self_ms / total : 0.0);
    os << line;
  }
  return os.str();
}

}  // namespace era::bench
