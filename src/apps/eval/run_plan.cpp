#include "apps/eval/run_plan.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "era/error.h"
#include "era/methods.h"

namespace era::eval {
namespace {

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-';
}

}  // namespace

std::string PlannedRun::label() const { return tokens > 0 ? method + ", " + std::to_string(tokens) + " tokens" : method; }

std::string run_file_name(const std::string& method, int64_t tokens) {
  std::string name = method;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !safe_char(c); }, '-');
  if (tokens > 0) name += "_" + std::to_string(tokens);
  return name + ".jsonl";
}

std::vector<PlannedRun> plan_runs(const std::vector<std::string>& methods, const std::vector<int64_t>& budgets,
                                  const std::string& answers_dir) {
  if (methods.empty()) bad("no method given (--methods)");
  for (size_t i = 0; i < budgets.size(); ++i) {
    if (budgets[i] < 0) bad("--tokens " + std::to_string(budgets[i]) + ": a budget must be >= 0");
    if (std::find(budgets.begin(), budgets.begin() + static_cast<std::ptrdiff_t>(i), budgets[i]) !=
        budgets.begin() + static_cast<std::ptrdiff_t>(i))
      bad("--tokens lists " + std::to_string(budgets[i]) + " twice");
  }
  const std::vector<int64_t> each_budget = budgets.empty() ? std::vector<int64_t>{0} : budgets;
  std::vector<PlannedRun> runs;
  std::map<std::string, std::string> file_owner;  // file name -> the run that writes it
  for (size_t i = 0; i < methods.size(); ++i) {
    const std::string& m = methods[i];
    if (m.empty()) bad("--methods has an empty method name");
    if (std::find(methods.begin(), methods.begin() + static_cast<std::ptrdiff_t>(i), m) !=
        methods.begin() + static_cast<std::ptrdiff_t>(i))
      bad("--methods lists " + m + " twice");
    for (const int64_t tokens : is_unreduced_method(m) ? std::vector<int64_t>{0} : each_budget) {
      PlannedRun run;
      run.method = m;
      run.tokens = tokens;
      const std::string file = run_file_name(m, tokens);
      const auto [it, fresh] = file_owner.emplace(file, run.label());
      if (!fresh) bad("the runs '" + it->second + "' and '" + run.label() + "' would both write " + file);
      run.answers = (std::filesystem::path(answers_dir) / file).string();
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

}  // namespace era::eval
