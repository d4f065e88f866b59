#include "apps/score/retention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "apps/score/json_read.h"
#include "era/error.h"

namespace era::score {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

const std::vector<std::string>& column_order() {
  static const std::vector<std::string> order = {"vqav2",   "gqa",        "sqa",   "textvqa",  "pope",           "mme",
                                                 "mmbench", "mmbench_cn", "mmvet", "videomme", "longvideobench", "mvbench"};
  return order;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

double number_at(const json& entry, const std::string& key, const std::string& where) {
  if (!entry.contains(key) || !entry[key].is_number()) fail(where + ": no number \"" + key + "\"");
  return entry[key].get<double>();
}

}  // namespace

bool is_mme_benchmark(const std::string& key) { return key == "mme" || key.rfind("mme_", 0) == 0; }

MethodScores read_results(const std::string& path, MmeTotal mme) {
  const json j = detail::read_json_file(path, "results");
  if (!j.is_object() || !j.contains("benchmarks") || !j["benchmarks"].is_object())
    fail("results " + path + ": expected {\"method\": ..., \"benchmarks\": {...}} as written by era_score --json");
  MethodScores m;
  m.path = path;
  if (j.contains("reduction")) {
    const json& r = j["reduction"];
    const std::string where = "results " + path + " reduction";
    if (!r.is_object() || !r.contains("method") || !r["method"].is_string())
      fail(where + ": expected {\"method\": \"...\", \"tokens\": N}");
    m.reduction =
        Reduction{r["method"].get<std::string>(), r.contains("tokens") ? static_cast<int64_t>(number_at(r, "tokens", where)) : 0,
                  r.contains("keep_ratio") ? number_at(r, "keep_ratio", where) : 0.0};
  }
  m.name = j.contains("method") && j["method"].is_string() && !j["method"].get<std::string>().empty()
               ? j["method"].get<std::string>()
               : std::filesystem::path(path).stem().string();
  for (const auto& [key, entry] : j["benchmarks"].items()) {
    const std::string where = "results " + path + " benchmark " + key;
    if (entry.is_number()) {
      if (is_mme_benchmark(key) && mme == MmeTotal::kPerceptionCognition)
        fail(where + ": --mme total (Perception + Cognition) needs values.perception and values.cognition, not a bare number");
      m.scores[key] = entry.get<double>();
      continue;
    }
    if (!entry.is_object()) fail(where + ": expected an object with a \"score\" or a number");
    if (entry.contains("visual_tokens")) {
      const json& v = entry["visual_tokens"];
      if (!v.is_object()) fail(where + ": visual_tokens: expected {\"mean\": m, \"answers\": n}");
      m.visual_tokens[key] = {number_at(v, "mean", where + " visual_tokens"), number_at(v, "answers", where + " visual_tokens")};
    }
    if (is_mme_benchmark(key) && mme == MmeTotal::kPerceptionCognition) {
      if (!entry.contains("values") || !entry["values"].is_object())
        fail(where + ": --mme total (Perception + Cognition) needs values.perception and values.cognition");
      m.scores[key] = number_at(entry["values"], "perception", where) + number_at(entry["values"], "cognition", where);
    } else {
      m.scores[key] = number_at(entry, "score", where);
    }
  }
  return m;
}

double retention_average(const std::vector<double>& method, const std::vector<double>& full) {
  if (method.size() != full.size() || method.empty())
    fail("retention needs the same, non-zero number of method and full-model scores");
  double sum = 0;
  for (size_t i = 0; i < method.size(); ++i) {
    if (full[i] == 0) fail("retention: a full-model score is 0");
    sum += method[i] / full[i];
  }
  return 100.0 * (sum / static_cast<double>(method.size()));
}

RetentionTable retention(const MethodScores& reference, const std::vector<MethodScores>& methods,
                         const std::vector<std::string>& benchmarks, MmeTotal mme) {
  RetentionTable t;
  t.mme = mme;
  t.reference_name = reference.name;
  if (benchmarks.empty()) {
    for (const auto& b : column_order())
      if (reference.scores.count(b)) t.benchmarks.push_back(b);
    for (const auto& [b, s] : reference.scores)
      if (std::find(t.benchmarks.begin(), t.benchmarks.end(), b) == t.benchmarks.end()) t.benchmarks.push_back(b);
  } else {
    t.benchmarks = benchmarks;
  }
  if (t.benchmarks.empty()) fail("reference " + reference.name + ": no benchmark scores");
  for (const auto& b : t.benchmarks) {
    const auto it = reference.scores.find(b);
    if (it == reference.scores.end()) fail("reference " + reference.name + " has no score for benchmark " + b);
    if (it->second == 0) t.zero_reference.push_back(b);
    t.reference.push_back(it->second);
  }
  if (t.usable() == 0) fail("reference " + reference.name + ": every benchmark score is 0 (no ratio can be formed)");
  for (const auto& m : methods) {
    RetentionRow row;
    row.method = m.name;
    std::vector<double> have, full;
    for (size_t i = 0; i < t.benchmarks.size(); ++i) {
      const auto it = m.scores.find(t.benchmarks[i]);
      if (it == m.scores.end()) {
        row.scores.push_back(std::nullopt);
        row.relative.push_back(std::nullopt);
        continue;
      }
      row.scores.push_back(it->second);
      if (t.reference[i] == 0) {  // shown, not compared
        row.relative.push_back(std::nullopt);
        continue;
      }
      row.relative.push_back(100.0 * it->second / t.reference[i]);
      have.push_back(it->second);
      full.push_back(t.reference[i]);
    }
    row.used = have.size();
    if (!have.empty()) row.average = retention_average(have, full);
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string zero_reference_note(const RetentionTable& t) {
  if (t.zero_reference.empty()) return "";
  std::string names;
  for (const auto& b : t.zero_reference) names += (names.empty() ? "" : ", ") + b;
  return "Left out of Avg. (%): " + names + " (the reference " + t.reference_name +
         " scored 0 there, so no ratio exists; check that run).\n";
}

std::string format_retention(const RetentionTable& t) {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {"method"};
  for (const auto& b : t.benchmarks)
    header.push_back(is_mme_benchmark(b) && t.mme == MmeTotal::kPerceptionCognition ? b + " (P+C)" : b);
  header.push_back("Avg. (%)");
  cells.push_back(header);
  std::vector<std::string> ref = {t.reference_name + " (reference)"};
  for (const double s : t.reference) ref.push_back(fixed(s, 2));
  ref.push_back("100.00");
  cells.push_back(ref);
  bool partial = false;
  for (const auto& row : t.rows) {
    std::vector<std::string> line = {row.method}, rel = {""};
    for (size_t i = 0; i < t.benchmarks.size(); ++i) {
      line.push_back(row.scores[i] ? fixed(*row.scores[i], 2) : "-");
      rel.push_back(row.relative[i] ? fixed(*row.relative[i], 2) + "%" : "-");
    }
    const bool part = row.used < t.usable();
    partial = partial || part;
    line.push_back(row.average ? fixed(*row.average, 2) + (part ? "*" : "") : "-");
    rel.push_back("");
    cells.push_back(line);
    cells.push_back(rel);
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::ostringstream out;
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) {
      if (c == 0) out << line[c] << std::string(width[c] - line[c].size(), ' ');
      else out << "  " << std::string(width[c] - line[c].size(), ' ') << line[c];
    }
    out << "\n";
  }
  out << "Avg. (%) = 100 * mean over benchmarks of method / reference (unweighted); second line of each method: "
         "per-benchmark retention.\n";
  out << "MME enters as " << (t.mme == MmeTotal::kPerception ? "Perception" : "Perception + Cognition") << ".\n";
  if (partial) out << "* averaged over the benchmarks the method has (\"-\" = missing).\n";
  out << zero_reference_note(t);
  return out.str();
}

std::string retention_json(const RetentionTable& t) {
  json j;
  j["benchmarks"] = t.benchmarks;
  j["mme_total"] = t.mme == MmeTotal::kPerception ? "perception" : "perception+cognition";
  j["reference"] = {{"method", t.reference_name}, {"scores", json::object()}};
  for (size_t i = 0; i < t.benchmarks.size(); ++i) j["reference"]["scores"][t.benchmarks[i]] = t.reference[i];
  j["methods"] = json::array();
  for (const auto& row : t.rows) {
    json r = {{"method", row.method}, {"scores", json::object()}, {"relative", json::object()}};
    for (size_t i = 0; i < t.benchmarks.size(); ++i) {
      if (!row.scores[i]) continue;
      r["scores"][t.benchmarks[i]] = *row.scores[i];
      if (row.relative[i]) r["relative"][t.benchmarks[i]] = *row.relative[i];
    }
    r["avg"] = row.average ? json(*row.average) : json(nullptr);
    r["benchmarks_used"] = row.used;
    j["methods"].push_back(r);
  }
  j["left_out_of_avg"] = t.zero_reference;
  return j.dump(2);
}

}  // namespace era::score
