#pragma once
// One benchmark's score as era_score prints it and stores it: a headline number, named values,
// counts, breakdown tables and protocol notes; plus the results JSON that collects one method's
// scores over several benchmarks (the input of `era_score retention`).
#include <string>
#include <utility>
#include <vector>

#include "apps/score/gqa.h"
#include "apps/score/mmbench.h"
#include "apps/score/mme.h"
#include "apps/score/pope.h"
#include "apps/score/run_info.h"
#include "apps/score/scienceqa.h"
#include "apps/score/video_choice.h"
#include "apps/score/vqa_accuracy.h"

namespace era::score {

struct ReportTable {
  std::string name;                  // JSON key, e.g. "splits"
  std::vector<std::string> columns;  // after the row-label column
  std::vector<int> decimals;         // per column (0 = a count)
  std::vector<std::string> row_labels;
  std::vector<std::vector<double>> rows;
};

struct ScoreReport {
  std::string benchmark;  // vqav2, textvqa, gqa, pope, mme, sqa, mmbench, videomme, longvideobench, mvbench
  std::string title;      // human name
  std::string metric;     // what `score` is
  double score = 0;
  std::vector<std::pair<std::string, double>> values;
  std::vector<std::pair<std::string, double>> counts;
  std::vector<ReportTable> tables;
  std::vector<std::string> notes;  // protocol, and warnings about skipped items
};

ScoreReport make_report(const VqaResult& r, const std::string& benchmark);  // "vqav2" or "textvqa"
ScoreReport make_report(const GqaResult& r);
ScoreReport make_report(const PopeResult& r);
ScoreReport make_report(const MmeResult& r);
ScoreReport make_report(const SqaResult& r);
ScoreReport make_report(const MmbResult& r);
ScoreReport make_report(const VideoChoiceResult& r, VideoChoiceBenchmark benchmark);

// The table era_score prints.
std::string format_report(const ScoreReport& report, const std::string& answers_path, size_t answer_records);

// Adds (or replaces) `report` under benchmarks.<key> of the results JSON at `path`, creating the
// file if needed; sets "method" when `method` is non-empty (or the file has none yet: then the
// answers' reduction method, else their model_id). `sources` (e.g. answers / annotations paths)
// are stored with the entry. When the answers name their run (`run.method`, era_eval's), the file
// gets "reduction": {"method", "tokens"[, "keep_ratio"]} and the entry "visual_tokens":
// {"mean", "answers"} (the real counts; `era_score compare` groups and labels by them); a file that
// already holds another run's reduction is refused, so one results file is one (method, budget).
void write_results(const std::string& path, const std::string& key, const std::string& method, const std::string& model_id,
                   const ScoreReport& report, const std::vector<std::pair<std::string, std::string>>& sources,
                   const RunInfo& run = {});

}  // namespace era::score
