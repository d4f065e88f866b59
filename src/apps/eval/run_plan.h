#pragma once
// Side-by-side evaluation: the (method, budget) runs one era_eval call makes, and the answers file
// each one writes, so several methods and budgets are compared on the same questions with the
// model loaded once.
#include <cstdint>
#include <string>
#include <vector>

namespace era::eval {

struct PlannedRun {
  std::string method;         // as given to the reducer ("era:dep+btr")
  int64_t tokens = 0;         // nominal budget; 0 = none (the method keeps every token, or --keep-ratio)
  std::string answers;        // this run's answers JSONL
  std::string label() const;  // "era:dep+btr, 64 tokens" / "full"
};

// The budget-free method: it keeps every visual token, so it runs once whatever the budgets.

// Every method at every budget: methods outer, budgets inner, in the order given. "full" runs once,
// with tokens 0. An empty `budgets` means no budget (tokens 0). Each run's answers file is
// <answers_dir>/run_file_name(method, tokens). Throws era::Error(kInvalidArgument) for no method,
// an empty or repeated method, a repeated or negative budget, or two runs whose file names collide
// (e.g. "era:dep" and "era-dep").
std::vector<PlannedRun> plan_runs(const std::vector<std::string>& methods, const std::vector<int64_t>& budgets,
                                  const std::string& answers_dir);

// A file name that is safe everywhere: "<method>_<tokens>.jsonl", or "<method>.jsonl" for tokens 0,
// with every character of the method but ASCII letters, digits, '.', '+' and '-' written as '-'
// ("era:dep+btr", 64 -> "era-dep+btr_64.jsonl").
std::string run_file_name(const std::string& method, int64_t tokens);

}  // namespace era::eval
