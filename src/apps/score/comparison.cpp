#include "apps/score/comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "era/error.h"
#include "era/methods.h"

namespace era::score {
namespace {

using nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The papers' column names for the benchmarks era_score knows; the key for anything else.
std::string column_title(const std::string& key, MmeTotal mme) {
  static const std::map<std::string, std::string> titles = {
      {"vqav2", "VQAv2"}, {"gqa", "GQA"},     {"sqa", "SQA-IMG"},       {"textvqa", "TextVQA"}, {"pope", "POPE"},
      {"mme", "MME"},     {"mmbench", "MMB"}, {"mmbench_cn", "MMB-CN"}, {"mmvet", "MM-Vet"}};
  const auto it = titles.find(key);
  std::string title = it != titles.end() ? it->second : key;
  if (is_mme_benchmark(key) && mme == MmeTotal::kPerceptionCognition) title += " (P+C)";
  return title;
}

// Mean real visual tokens over the answers of `benchmarks` (weighted by answer count).
std::optional<double> mean_visual_tokens(const MethodScores& run, const std::vector<std::string>& benchmarks) {
  double sum = 0, answers = 0;
  for (const auto& b : benchmarks) {
    const auto it = run.visual_tokens.find(b);
    if (it == run.visual_tokens.end()) continue;
    sum += it->second.mean * it->second.answers;
    answers += it->second.answers;
  }
  if (answers <= 0) return std::nullopt;
  return sum / answers;
}

std::string budget_text(const Reduction& r) {
  if (r.tokens > 0) return std::to_string(r.tokens) + " tokens";
  if (r.keep_ratio > 0) return fixed(100.0 * r.keep_ratio, 0) + "% of the tokens";
  return "all tokens";
}

// "Retain 64 tokens (↓ 88.9%)": the cut is relative to the upper bound's real mean count.
std::string group_title(const Reduction& r, const std::optional<double>& full_tokens) {
  std::string title = "Retain " + budget_text(r);
  if (r.tokens > 0 && full_tokens && *full_tokens > 0)
    title += " (\xE2\x86\x93 " + fixed(100.0 * (1.0 - static_cast<double>(r.tokens) / *full_tokens), 1) + "%)";
  else if (r.tokens == 0 && r.keep_ratio > 0) title += " (\xE2\x86\x93 " + fixed(100.0 * (1.0 - r.keep_ratio), 1) + "%)";
  return title;
}

// Display width of UTF-8 text (one column per code point), for aligned Markdown source.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string markdown_rows(const std::vector<std::vector<std::string>>& cells) {
  std::vector<size_t> width(cells.front().size(), 3);
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], display_width(line[c]));
  std::ostringstream out;
  for (size_t r = 0; r < cells.size(); ++r) {
    out << "|";
    for (size_t c = 0; c < cells[r].size(); ++c) {
      const std::string pad(width[c] - display_width(cells[r][c]), ' ');
      out << " " << (c == 0 ? cells[r][c] + pad : pad + cells[r][c]) << " |";
    }
    out << "\n";
    if (r == 0) {  // the alignment row: method left, numbers right
      out << "|";
      for (size_t c = 0; c < width.size(); ++c)
        out << " " << (c == 0 ? ":" + std::string(width[c] - 1, '-') : std::string(width[c] - 1, '-') + ":") << " |";
      out << "\n";
    }
  }
  return out.str();
}

ordered_json row_json(const RetentionRow& row, const std::vector<std::string>& benchmarks, const std::optional<double>& visual,
                      const std::string& path) {
  ordered_json r = {
      {"method", row.method}, {"results", path}, {"scores", ordered_json::object()}, {"relative", ordered_json::object()}};
  for (size_t i = 0; i < benchmarks.size(); ++i) {
    if (!row.scores[i]) continue;
    r["scores"][benchmarks[i]] = *row.scores[i];
    if (row.relative[i]) r["relative"][benchmarks[i]] = *row.relative[i];
  }
  r["avg"] = row.average ? ordered_json(*row.average) : ordered_json(nullptr);
  r["benchmarks_used"] = row.used;
  r["visual_tokens_mean"] = visual ? ordered_json(*visual) : ordered_json(nullptr);
  return r;
}

}  // namespace

size_t find_reference(const std::vector<MethodScores>& runs) {
  std::vector<size_t> found;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].reduction && is_unreduced_method(runs[i].reduction->method)) found.push_back(i);
  if (found.size() == 1) return found[0];
  if (found.empty())
    fail(
        "no results file is from the full model (reduction method \"full\"): add its results, or name the upper "
        "bound with --reference");
  fail("several results files are from the full model (" + runs[found[0]].path + ", " + runs[found[1]].path +
       "): name the upper bound with --reference");
}

ComparisonTable compare_runs(const MethodScores& reference, const std::vector<MethodScores>& runs,
                             const std::vector<std::string>& benchmarks, MmeTotal mme) {
  ComparisonTable t;
  t.retention = retention(reference, runs, benchmarks, mme);
  t.reference_path = reference.path;
  t.reference_visual_tokens = mean_visual_tokens(reference, t.retention.benchmarks);
  ComparisonGroup upper;
  upper.title = "Upper bound" +
                (t.reference_visual_tokens ? ": " + fixed(*t.reference_visual_tokens, 0) + " tokens" : std::string()) + " (100%)";
  t.groups.push_back(upper);
  // The runs by budget, each a plain Reduction while grouping and sorting (a ComparisonGroup's is
  // optional, for the upper bound).
  struct Budget {
    Reduction reduction;
    std::vector<size_t> rows;
  };
  std::vector<Budget> budgets;
  for (size_t i = 0; i < runs.size(); ++i) {
    const MethodScores& run = runs[i];
    if (!run.reduction)
      fail("results " + run.path +
           " does not say which run it is from (no \"reduction\"): score era_eval answers with "
           "era_score --json, or add \"reduction\": {\"method\": \"...\", \"tokens\": N}");
    t.visual_tokens.push_back(mean_visual_tokens(run, t.retention.benchmarks));
    t.paths.push_back(run.path);
    const Reduction& r = *run.reduction;
    auto g = std::find_if(budgets.begin(), budgets.end(), [&](const Budget& x) {
      return x.reduction.tokens == r.tokens && x.reduction.keep_ratio == r.keep_ratio;
    });
    if (g == budgets.end()) {
      budgets.push_back({r, {}});
      g = budgets.end() - 1;
    }
    g->rows.push_back(i);
  }
  // Largest budget first, as the papers list them; token budgets before keep ratios.
  std::stable_sort(budgets.begin(), budgets.end(), [](const Budget& a, const Budget& b) {
    if ((a.reduction.tokens > 0) != (b.reduction.tokens > 0)) return a.reduction.tokens > 0;
    if (a.reduction.tokens != b.reduction.tokens) return a.reduction.tokens > b.reduction.tokens;
    return a.reduction.keep_ratio > b.reduction.keep_ratio;
  });
  for (Budget& b : budgets)
    t.groups.push_back({group_title(b.reduction, t.reference_visual_tokens), b.reduction, std::move(b.rows)});
  return t;
}

std::string comparison_markdown(const ComparisonTable& t) {
  const RetentionTable& rt = t.retention;
  const auto visual_cell = [](const std::optional<double>& v) { return v ? fixed(*v, 1) : std::string("-"); };
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {"Method"};
  for (const auto& b : rt.benchmarks) header.push_back(column_title(b, rt.mme));
  header.push_back("Avg. (%)");
  header.push_back("Visual tokens");
  cells.push_back(header);
  const auto title_row = [&](const std::string& title) {
    std::vector<std::string> line(header.size());
    line[0] = "**" + title + "**";
    cells.push_back(line);
  };
  title_row(t.groups.front().title);
  std::vector<std::string> ref = {rt.reference_name};
  for (const double s : rt.reference) ref.push_back(fixed(s, 1));
  ref.push_back("100.0%");
  ref.push_back(visual_cell(t.reference_visual_tokens));
  cells.push_back(ref);
  bool partial = false;
  for (size_t g = 1; g < t.groups.size(); ++g) {
    title_row(t.groups[g].title);
    for (const size_t i : t.groups[g].rows) {
      const RetentionRow& row = rt.rows[i];
      std::vector<std::string> line = {row.method};
      for (const auto& s : row.scores) line.push_back(s ? fixed(*s, 1) : "-");
      const bool part = row.used < rt.usable();
      partial = partial || part;
      line.push_back(row.average ? fixed(*row.average, 1) + "%" + (part ? "*" : "") : "-");
      line.push_back(visual_cell(t.visual_tokens[i]));
      cells.push_back(line);
    }
  }
  std::string out = markdown_rows(cells);
  out +=
      "\nAvg. (%): 100 x the unweighted mean over the benchmarks of score / upper bound. Visual tokens: the mean "
      "number of visual tokens the decoder really saw per answer (era_eval's metadata.visual_tokens); the budget "
      "in each heading is the nominal one.";
  out += std::string(" MME enters as ") + (rt.mme == MmeTotal::kPerception ? "Perception" : "Perception + Cognition") + ".\n";
  if (partial) out += "\n\\* averaged over the benchmarks the run has (\"-\" = missing).\n";
  if (!rt.zero_reference.empty()) out += "\n" + zero_reference_note(rt);
  return out;
}

std::string comparison_json(const ComparisonTable& t) {
  const RetentionTable& rt = t.retention;
  ordered_json j;
  j["benchmarks"] = rt.benchmarks;
  j["mme_total"] = rt.mme == MmeTotal::kPerception ? "perception" : "perception+cognition";
  j["left_out_of_avg"] = rt.zero_reference;
  RetentionRow ref;
  ref.method = rt.reference_name;
  for (const double s : rt.reference) {
    ref.scores.emplace_back(s);
    ref.relative.emplace_back(s == 0 ? std::nullopt : std::optional<double>(100.0));
  }
  ref.average = 100.0;
  ref.used = rt.usable();
  j["groups"] = ordered_json::array();
  for (const auto& g : t.groups) {
    ordered_json group = {{"title", g.title}};
    if (g.budget) {
      group["tokens"] = g.budget->tokens;
      if (g.budget->keep_ratio > 0) group["keep_ratio"] = g.budget->keep_ratio;
    }
    group["rows"] = ordered_json::array();
    if (!g.budget) group["rows"].push_back(row_json(ref, rt.benchmarks, t.reference_visual_tokens, t.reference_path));
    for (const size_t i : g.rows) group["rows"].push_back(row_json(rt.rows[i], rt.benchmarks, t.visual_tokens[i], t.paths[i]));
    j["groups"].push_back(group);
  }
  return j.dump(2);
}

}  // namespace era::score
