#pragma once
// The side-by-side table of the token-pruning papers (the ERA paper's main tables): rows are runs
// grouped by budget under an "Upper bound" row (the full model), columns are benchmarks, then
// Avg. (%) (retention relative to the upper bound, eval/score/retention.h) and the mean number of
// visual tokens the decoder really saw. Input: one results JSON per (method, budget) run, as
// `era_score --json` writes them from era_eval answers (any number of benchmarks each).
#include <optional>
#include <string>
#include <vector>

#include "apps/score/retention.h"

namespace era::score {

struct ComparisonGroup {
  std::string title;                // "Retain 64 tokens (↓ 88.9%)"
  std::optional<Reduction> budget;  // nullopt for the upper-bound group
  std::vector<size_t> rows;         // indices into ComparisonTable::retention.rows
};

struct ComparisonTable {
  RetentionTable retention;  // the reference (upper bound) and every run's scores, ratios, Avg.
  std::string reference_path;
  std::optional<double> reference_visual_tokens;     // mean real count, when the results carry it
  std::vector<std::optional<double>> visual_tokens;  // per retention row
  std::vector<std::string> paths;                    // per retention row: its results file
  std::vector<ComparisonGroup> groups;               // upper bound first, then budgets, largest first
};

// Index of the reference among `runs`: the one run whose reduction method is "full". Throws
// era::Error(kInvalidArgument) when there is none or more than one (pass --reference then).
size_t find_reference(const std::vector<MethodScores>& runs);

// Builds the table. Every run needs a "reduction" (its budget); runs are grouped by (tokens,
// keep_ratio), largest budget first, keeping the given order inside a group. A row's visual-token
// mean is over all its answers in the table's benchmarks (weighted by their answer counts).
// `benchmarks` and `mme` as for retention().
ComparisonTable compare_runs(const MethodScores& reference, const std::vector<MethodScores>& runs,
                             const std::vector<std::string>& benchmarks = {}, MmeTotal mme = MmeTotal::kPerception);

// GitHub Markdown: the table, then notes saying what Avg. and the token column are.
std::string comparison_markdown(const ComparisonTable& table);
std::string comparison_json(const ComparisonTable& table);

}  // namespace era::score
