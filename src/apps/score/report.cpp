#include "apps/score/report.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/score/json_read.h"
#include "era/error.h"

namespace era::score {
namespace {

using nlohmann::ordered_json;

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

double d(size_t n) { return static_cast<double>(n); }

void skipped_notes(ScoreReport& r, size_t error_records, size_t unmatched, size_t duplicates, size_t missing,
                   const std::string& missing_what) {
  if (error_records) r.notes.push_back(std::to_string(error_records) + " error record(s) skipped (not scored)");
  if (unmatched) r.notes.push_back(std::to_string(unmatched) + " answer(s) matched no annotation (skipped)");
  if (duplicates) r.notes.push_back(std::to_string(duplicates) + " duplicate answer(s): the last one counts");
  if (missing) r.notes.push_back(std::to_string(missing) + " " + missing_what + " without an answer (not scored)");
}

}  // namespace

ScoreReport make_report(const VqaResult& r, const std::string& benchmark) {
  ScoreReport s;
  s.benchmark = benchmark;
  s.score = r.accuracy;
  s.metric = "VQA accuracy (%)";
  s.values = {{"accuracy", r.accuracy}};
  s.counts = {{"scored", d(r.scored)},
              {"error_records", d(r.error_records)},
              {"unmatched", d(r.unmatched)},
              {"duplicates", d(r.duplicates)},
              {"missing", d(r.missing)}};
  if (benchmark == "textvqa") {
    s.title = "TextVQA (val)";
    s.notes.push_back(
        "protocol: LLaVA eval_textvqa.py - MMF normaliser on the prediction and the 10 answers, "
        "join on (question_id = image_id, question from the prompt)");
    s.counts.push_back({"ocr_prompts", d(r.ocr_prompts)});
    if (r.ocr_prompts == r.scored)
      s.notes.push_back("OCR tokens in every prompt (LLaVA's protocol, comparable with its 58.2 / 61.3)");
    else if (r.ocr_prompts == 0)
      s.notes.push_back("no OCR tokens in the prompts (lmms-eval-style protocol: not comparable with LLaVA's numbers)");
    else
      s.notes.push_back("OCR tokens in only " + std::to_string(r.ocr_prompts) + " of " + std::to_string(r.scored) +
                        " prompts: mixed protocol");
  } else {
    s.title = "VQAv2 (val, local)";
    s.notes.push_back(
        "protocol: VQA server accuracy (vqaEval.py) of LLaVA's normalised upload; published VQAv2 "
        "numbers are test-dev from EvalAI (write the upload with --upload)");
  }
  if (!r.by_type.empty()) {
    ReportTable t{"answer_types", {"questions", "accuracy"}, {0, 2}, {}, {}};
    for (const auto& bt : r.by_type) {
      t.row_labels.push_back(bt.name);
      t.rows.push_back({d(bt.questions), bt.accuracy});
      s.values.push_back({"accuracy_" + bt.name, bt.accuracy});
    }
    s.tables.push_back(t);
  }
  skipped_notes(s, r.error_records, r.unmatched, r.duplicates, r.missing, "annotated question(s)");
  return s;
}

ScoreReport make_report(const GqaResult& r) {
  ScoreReport s;
  s.benchmark = "gqa";
  s.title = "GQA (testdev-balanced)";
  s.metric = "accuracy (%)";
  s.score = r.accuracy;
  s.values = {{"accuracy", r.accuracy}};
  s.counts = {{"scored", d(r.scored)},       {"correct", d(r.correct)},       {"error_records", d(r.error_records)},
              {"unmatched", d(r.unmatched)}, {"duplicates", d(r.duplicates)}, {"unbalanced", d(r.unbalanced)},
              {"missing", d(r.missing)}};
  if (!r.by_structural.empty()) {
    ReportTable t{"structural", {"questions", "correct", "accuracy"}, {0, 0, 2}, {}, {}};
    for (const auto& g : r.by_structural) {
      t.row_labels.push_back(g.name);
      t.rows.push_back({d(g.questions), d(g.correct), g.accuracy});
    }
    s.tables.push_back(t);
  }
  s.notes.push_back("protocol: LLaVA convert_gqa_for_eval.py (text.rstrip('.').lower()) + eval.py exact match");
  if (r.unbalanced) s.notes.push_back(std::to_string(r.unbalanced) + " answer(s) to unbalanced questions (not scored)");
  skipped_notes(s, r.error_records, r.unmatched, r.duplicates, r.missing, "balanced question(s)");
  return s;
}

ScoreReport make_report(const PopeResult& r) {
  ScoreReport s;
  s.benchmark = "pope";
  s.title = "POPE (COCO)";
  s.metric = "mean F1 over splits (%)";
  s.score = 100.0 * r.mean_f1;
  s.values = {{"mean_f1", 100.0 * r.mean_f1}, {"mean_accuracy", 100.0 * r.mean_accuracy}};
  ReportTable t{"splits",
                {"answers", "labels", "TP", "FP", "TN", "FN", "acc", "precision", "recall", "f1", "yes_ratio"},
                {0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2},
                {},
                {}};
  size_t without = 0;
  for (const auto& sp : r.splits) {
    const auto& m = sp.metrics;
    t.row_labels.push_back(sp.name);
    t.rows.push_back({d(sp.answers), d(sp.labels), d(m.tp), d(m.fp), d(m.tn), d(m.fn), 100 * m.accuracy, 100 * m.precision,
                      100 * m.recall, 100 * m.f1, 100 * m.yes_ratio});
    if (m.n() == 0) {
      ++without;
      continue;
    }
    s.values.push_back({"f1_" + sp.name, 100 * m.f1});
    s.values.push_back({"accuracy_" + sp.name, 100 * m.accuracy});
    if (sp.answers != sp.labels)
      s.notes.push_back("split " + sp.name + ": " + std::to_string(sp.answers) + " answers for " + std::to_string(sp.labels) +
                        " labels (paired by position up to the shorter)");
  }
  s.tables.push_back(t);
  s.counts = {{"error_records", d(r.error_records())}, {"unmatched", d(r.unmatched)}};
  s.notes.push_back(
      "protocol: LLaVA eval_pope.py - first-sentence yes/no parse, answers paired with labels by "
      "position per split; headline = mean of the split F1s");
  if (without) s.notes.push_back(std::to_string(without) + " split(s) without answers (left out of the means)");
  skipped_notes(s, r.error_records(), r.unmatched, 0, 0, "");
  return s;
}

ScoreReport make_report(const MmeResult& r) {
  ScoreReport s;
  s.benchmark = "mme";
  s.title = "MME";
  s.metric = "Perception (sum of acc + acc+ over 10 subtasks, max 2000)";
  s.score = r.perception;
  s.values = {{"perception", r.perception}, {"cognition", r.cognition}, {"total", r.total()}};
  ReportTable t{"subtasks",
                {"questions", "correct", "other", "images", "images_all_correct", "acc", "acc_plus", "score"},
                {0, 0, 0, 0, 0, 2, 2, 2},
                {},
                {}};
  for (const auto& st : r.subtasks) {
    t.row_labels.push_back(st.name);
    t.rows.push_back(
        {d(st.questions), d(st.correct), d(st.other), d(st.images), d(st.images_all_correct), st.acc, st.acc_plus, st.score()});
  }
  s.tables.push_back(t);
  s.counts = {
      {"error_records", d(r.error_records)}, {"unmatched", d(r.unmatched)}, {"incomplete_images", d(r.incomplete_images)}};
  s.notes.push_back(
      "protocol: LLaVA convert_answer_to_mme.py + MME calculation.py; score = Perception "
      "(LLaVA's tables); Cognition and Perception + Cognition are stored too");
  if (!r.missing_subtasks.empty()) {
    std::string list;
    for (const auto& m : r.missing_subtasks) list += (list.empty() ? "" : ", ") + m;
    s.notes.push_back("subtasks without answers (not in the totals): " + list);
  }
  if (r.incomplete_images)
    s.notes.push_back(std::to_string(r.incomplete_images) + " image(s) with an error record left out of acc+");
  skipped_notes(s, r.error_records, r.unmatched, 0, 0, "");
  return s;
}

ScoreReport make_report(const SqaResult& r) {
  ScoreReport s;
  s.benchmark = "sqa";
  s.title = "ScienceQA-IMG (test)";
  s.metric = "IMG accuracy (%)";
  s.score = r.img_accuracy;
  s.values = {{"img_accuracy", r.img_accuracy}, {"accuracy", r.accuracy}};
  s.counts = {{"img_total", d(r.img_total)}, {"img_correct", d(r.img_correct)},     {"total", d(r.total)},
              {"correct", d(r.correct)},     {"failed_parses", d(r.failed_parses)}, {"error_records", d(r.error_records)},
              {"unmatched", d(r.unmatched)}, {"duplicates", d(r.duplicates)},       {"missing", d(r.missing)}};
  s.notes.push_back(
      "protocol: LLaVA eval_science_qa.py - 3-rule letter parse; IMG = answers whose prompt has "
      "\"<image>\"; accuracy = all answered test problems");
  skipped_notes(s, r.error_records, r.unmatched, r.duplicates, r.missing, "test problem(s)");
  return s;
}

ScoreReport make_report(const VideoChoiceResult& r, VideoChoiceBenchmark benchmark) {
  const bool mvbench = benchmark == VideoChoiceBenchmark::kMvBench;
  ScoreReport s;
  // name, title and protocol note of each benchmark
  static const std::map<VideoChoiceBenchmark, std::array<const char*, 3>> kText = {
      {VideoChoiceBenchmark::kVideoMme,
       {"videomme", "Video-MME (multiple choice)",
        "protocol: lmms-eval videomme extract_characters_regex (letters A-D, its prefix list as it runs), exact letter "
        "match"}},
      {VideoChoiceBenchmark::kLongVideoBench,
       {"longvideobench", "LongVideoBench (multiple choice)",
        "protocol: lmms-eval longvideobench parse (letters A-E); no letter counts wrong (lmms-eval draws a random one)"}},
      {VideoChoiceBenchmark::kMvBench,
       {"mvbench", "MVBench (multiple choice)",
        "protocol: lmms-eval mvbench mcq_acc (\"X. ...\", else the first A-E standing alone after its punctuation "
        "cleanup), exact letter match; accuracy over all answered questions (lmms-eval prints only the 20 task "
        "accuracies; with 200 questions a task, a full run's is their mean)"}},
  };
  const auto& text = kText.at(benchmark);
  s.benchmark = text[0];
  s.title = text[1];
  s.notes.push_back(text[2]);
  s.metric = "accuracy (%)";
  s.score = r.accuracy;
  s.values = {{"accuracy", r.accuracy}};
  s.counts = {{"total", d(r.total)},         {"correct", d(r.correct)},
              {"unparsed", d(r.unparsed)},   {"error_records", d(r.error_records)},
              {"unmatched", d(r.unmatched)}, {"duplicates", d(r.duplicates)},
              {"missing", d(r.missing)}};
  if (mvbench) s.counts.insert(s.counts.begin() + 3, {"empty", d(r.empty)});
  ReportTable t{"groups", {"answered", "correct", "accuracy"}, {0, 0, 2}, {}, {}};
  for (const auto& [group, counts] : r.by_group) {
    t.row_labels.push_back(group);
    t.rows.push_back({d(counts.first), d(counts.second),
                      counts.first ? 100.0 * static_cast<double>(counts.second) / static_cast<double>(counts.first) : 0.0});
  }
  s.tables.push_back(t);
  if (r.unparsed) s.notes.push_back(std::to_string(r.unparsed) + " answer(s) gave no option letter (counted wrong)");
  if (r.empty)
    s.notes.push_back(std::to_string(r.empty) +
                      " empty answer(s) left out of the accuracy (as lmms-eval's "
                      "mvbench_aggregate_results leaves them out)");
  if (mvbench && r.by_group.size() != 20)
    s.notes.push_back("the answers cover " + std::to_string(r.by_group.size()) + " of MVBench's 20 tasks");
  skipped_notes(s, r.error_records, r.unmatched, r.duplicates, r.missing, "annotated question(s)");
  return s;
}

ScoreReport make_report(const MmbResult& r) {
  ScoreReport s;
  s.benchmark = "mmbench";
  s.title = "MMBench (circular)";
  s.metric = "circular accuracy (%)";
  s.score = r.circular_accuracy;
  s.values = {{"circular_accuracy", r.circular_accuracy}, {"first_pass_accuracy", r.first_pass_accuracy}};
  s.counts = {{"groups", d(r.groups)},
              {"correct_groups", d(r.correct_groups)},
              {"incomplete_groups", d(r.incomplete_groups)},
              {"first_pass_rows", d(r.first_pass_rows)},
              {"first_pass_correct", d(r.first_pass_correct)},
              {"unparsed", d(r.unparsed)},
              {"error_records", d(r.error_records)},
              {"unmatched", d(r.unmatched)},
              {"duplicates", d(r.duplicates)}};
  ReportTable t{"categories", {"groups", "correct", "accuracy"}, {0, 0, 2}, {}, {}};
  for (const auto& c : r.by_category) {
    t.row_labels.push_back(c.name.empty() ? "(none)" : c.name);
    t.rows.push_back({d(c.groups), d(c.correct), c.accuracy});
  }
  s.tables.push_back(t);
  s.notes.push_back(
      "protocol: circular evaluation (group = index % 1e6, every row right), VLMEvalKit exact-match "
      "letter extraction, no GPT judge");
  if (r.incomplete_groups) s.notes.push_back(std::to_string(r.incomplete_groups) + " group(s) with unanswered rows (not scored)");
  skipped_notes(s, r.error_records, r.unmatched, r.duplicates, 0, "");
  return s;
}

std::string format_report(const ScoreReport& r, const std::string& answers_path, size_t answer_records) {
  std::ostringstream out;
  out << r.title << "  -  " << answers_path << " (" << answer_records << " records)\n";
  out << "score  " << fixed(r.score, 2) << "  " << r.metric << "\n";
  for (const auto& [name, v] : r.values) out << "  " << name << " = " << fixed(v, 2) << "\n";
  for (const auto& t : r.tables) {
    if (t.rows.empty()) continue;
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> header = {t.name};
    header.insert(header.end(), t.columns.begin(), t.columns.end());
    cells.push_back(header);
    for (size_t i = 0; i < t.rows.size(); ++i) {
      std::vector<std::string> line = {t.row_labels[i]};
      for (size_t c = 0; c < t.rows[i].size(); ++c) line.push_back(fixed(t.rows[i][c], t.decimals[c]));
      cells.push_back(line);
    }
    std::vector<size_t> width(header.size(), 0);
    for (const auto& line : cells)
      for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
    out << "\n";
    for (const auto& line : cells) {
      for (size_t c = 0; c < line.size(); ++c) {
        if (c == 0) out << line[c] << std::string(width[c] - line[c].size(), ' ');
        else out << "  " << std::string(width[c] - line[c].size(), ' ') << line[c];
      }
      out << "\n";
    }
  }
  out << "\n";
  std::string counts;
  for (const auto& [name, v] : r.counts) counts += (counts.empty() ? "" : ", ") + name + " " + fixed(v, 0);
  out << "counts: " << counts << "\n";
  for (const auto& n : r.notes) out << "note: " << n << "\n";
  return out.str();
}

void write_results(const std::string& path, const std::string& key, const std::string& method, const std::string& model_id,
                   const ScoreReport& r, const std::vector<std::pair<std::string, std::string>>& sources, const RunInfo& run) {
  ordered_json j = ordered_json::object();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    const std::string text = read_text_file(path, "--json");
    try {
      j = ordered_json::parse(text);
    } catch (const nlohmann::json::exception&) {
      throw Error(ErrorCode::kInvalidArgument, "--json " + path + ": exists but is not valid JSON (not overwritten)");
    }
    if (!j.is_object() || (j.contains("benchmarks") && !j["benchmarks"].is_object()))
      throw Error(ErrorCode::kInvalidArgument,
                  "--json " + path + ": exists but is not an era_score results file (not overwritten)");
  }
  ordered_json reduction;
  if (!run.method.empty()) {
    reduction["method"] = run.method;
    reduction["tokens"] = run.tokens;
    if (run.keep_ratio > 0) reduction["keep_ratio"] = run.keep_ratio;
    if (j.contains("reduction") && j["reduction"] != reduction)
      throw Error(ErrorCode::kInvalidArgument, "--json " + path + " holds the scores of the run " + j["reduction"].dump() +
                                                   ", these answers are from " + reduction.dump() +
                                                   ": use one results file per (method, budget)");
  }
  // One results file is one model's run: the retention and comparison tables divide its scores by
  // a reference model's, so a score of another model slipped in would be compared as this one's.
  if (j.contains("benchmarks") && !model_id.empty()) {
    for (const auto& [other, entry] : j["benchmarks"].items()) {
      if (other == key || !entry.is_object() || !entry.contains("model_id") || !entry["model_id"].is_string()) continue;
      const std::string theirs = entry["model_id"].get<std::string>();
      if (!theirs.empty() && theirs != model_id)
        throw Error(ErrorCode::kInvalidArgument, "--json " + path + " holds " + other + " scores of model '" + theirs +
                                                     "', these answers are from model '" + model_id +
                                                     "': use one results file per model and run (not overwritten)");
    }
  }
  j["format"] = "era_score results v1";
  if (!method.empty()) j["method"] = method;
  else if (!j.contains("method")) j["method"] = run.method.empty() ? model_id : run.method;
  if (!reduction.is_null()) j["reduction"] = reduction;
  if (!j.contains("benchmarks")) j["benchmarks"] = ordered_json::object();
  ordered_json e;
  e["benchmark"] = r.benchmark;
  e["score"] = r.score;
  e["metric"] = r.metric;
  e["model_id"] = model_id;
  e["values"] = ordered_json::object();
  for (const auto& [name, v] : r.values) e["values"][name] = v;
  e["counts"] = ordered_json::object();
  for (const auto& [name, v] : r.counts) e["counts"][name] = static_cast<long long>(v);
  for (const auto& t : r.tables) {
    ordered_json rows = ordered_json::array();
    for (size_t i = 0; i < t.rows.size(); ++i) {
      ordered_json row;
      row["name"] = t.row_labels[i];
      for (size_t c = 0; c < t.columns.size(); ++c) {
        if (t.decimals[c] == 0) row[t.columns[c]] = static_cast<long long>(t.rows[i][c]);
        else row[t.columns[c]] = t.rows[i][c];
      }
      rows.push_back(row);
    }
    e["breakdown"][t.name] = rows;
  }
  e["notes"] = r.notes;
  if (run.visual_token_answers > 0)
    e["visual_tokens"] = {{"mean", run.visual_tokens_mean}, {"answers", static_cast<long long>(run.visual_token_answers)}};
  for (const auto& [name, value] : sources) e["sources"][name] = value;
  j["benchmarks"][key] = e;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw Error(ErrorCode::kInvalidArgument, "--json " + path + ": cannot write");
    f << j.dump(2) << "\n";
    if (!f) throw Error(ErrorCode::kInvalidArgument, "--json " + path + ": write failed");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(ErrorCode::kInvalidArgument, "--json " + path + ": cannot replace (" + ec.message() + ")");
}

}  // namespace era::score
