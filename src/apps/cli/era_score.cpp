// era_score: scores an answer JSONL (as LLaVA's scripts / era_eval write it) against a benchmark's
// ground truth with the official LLaVA protocol, prints a table and optionally stores the score in
// a per-method results JSON; `era_score retention` compares such files ("Avg. (%)") and
// `era_score compare` makes the papers' side-by-side table of many runs. Only flag parsing and
// wiring live here; the scorers are in src/apps/score/.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <set>

#include "apps/cli/entry.h"
#include "apps/score/answers.h"
#include "apps/score/comparison.h"
#include "apps/score/gqa.h"
#include "apps/score/mmbench.h"
#include "apps/score/mme.h"
#include "apps/score/pope.h"
#include "apps/score/report.h"
#include "apps/score/retention.h"
#include "apps/score/run_info.h"
#include "apps/score/scienceqa.h"
#include "apps/score/video_choice.h"
#include "apps/score/vqa_accuracy.h"
#include "era/error.h"

namespace {

using namespace era::score;

struct Flags {
  std::string benchmark, answers, annotations, questions, split = "test", json, name, method, upload, test_questions;
  // retention
  std::vector<std::string> results, benchmarks;
  std::string reference, mme = "perception", retention_json;
};

[[noreturn]] void usage_error(const std::string& message) { throw era::Error(era::ErrorCode::kInvalidArgument, message); }

void require(const std::string& value, const std::string& flag, const std::string& benchmark, const std::string& what) {
  if (value.empty()) usage_error(benchmark + " needs " + flag + " (" + what + ")");
}

int run_benchmark(const Flags& f) {
  if (f.benchmark.empty())
    usage_error(
        "--benchmark is required (vqav2, textvqa, gqa, pope, mme, sqa, mmbench, videomme, longvideobench, mvbench), or use "
        "'era_score retention'");
  require(f.answers, "--answers", f.benchmark, "the answer JSONL");
  const std::string& b = f.benchmark;
  if (b == "vqav2") {
    if (f.annotations.empty() && f.upload.empty())
      usage_error("vqav2 needs --annotations (val annotations, to score) and/or --upload (the EvalAI test-dev file to write)");
  } else if (b == "pope") {
    require(f.annotations, "--annotations", b, "the folder with coco_pope_<split>.json");
    require(f.questions, "--questions", b, "llava_pope_test.jsonl, for each question's split");
  } else {
    require(f.annotations, "--annotations", b, "the ground truth");
  }
  if (!f.upload.empty() && b != "vqav2") usage_error("--upload is only for vqav2");
  if (!f.test_questions.empty() && f.upload.empty()) usage_error("--test-questions goes with --upload");

  const AnswerFile answers = read_answers(f.answers);
  if (answers.records.empty()) usage_error("answers " + f.answers + ": no answer records");
  const RunInfo run = read_run_info(f.answers);

  if (!f.upload.empty()) {
    std::vector<std::string> all_ids;
    if (!f.test_questions.empty()) all_ids = read_question_ids(f.test_questions);
    write_vqav2_upload(f.upload, answers, f.test_questions.empty() ? nullptr : &all_ids);
    std::cout << "wrote the VQAv2 upload " << f.upload << " (" << (f.test_questions.empty() ? answers.answered() : all_ids.size())
              << " questions)\n";
    if (f.annotations.empty()) return 0;
  }

  ScoreReport report;
  size_t scored = 0;
  if (b == "vqav2") {
    const auto r = score_vqav2(answers, read_vqav2_annotations(f.annotations));
    scored = r.scored;
    report = make_report(r, "vqav2");
  } else if (b == "textvqa") {
    const auto r = score_textvqa(answers, read_textvqa_annotations(f.annotations));
    scored = r.scored;
    report = make_report(r, "textvqa");
  } else if (b == "gqa") {
    const auto r = score_gqa(answers, read_gqa_questions(f.annotations));
    scored = r.scored;
    report = make_report(r);
  } else if (b == "pope") {
    const auto r = score_pope(answers, read_question_categories(f.questions), read_pope_labels(f.annotations));
    for (const auto& s : r.splits) scored += s.metrics.n();
    report = make_report(r);
  } else if (b == "mme") {
    MmeGroundTruth gt(f.annotations);
    const auto r = score_mme(answers, gt);
    for (const auto& s : r.subtasks) scored += s.questions;
    report = make_report(r);
  } else if (b == "sqa") {
    const auto r = score_sqa(answers, read_sqa_problems(f.annotations, f.split));
    scored = r.total;
    report = make_report(r);
  } else if (b == "mmbench" || b == "mmbench_cn") {
    const auto r = score_mmbench(answers, read_mmbench_tsv(f.annotations));
    scored = r.groups;
    report = make_report(r);
    if (b == "mmbench_cn") report.title = "MMBench-CN (circular)";
  } else if (b == "videomme" || b == "longvideobench" || b == "mvbench") {
    const auto kind = b == "videomme"         ? VideoChoiceBenchmark::kVideoMme
                      : b == "longvideobench" ? VideoChoiceBenchmark::kLongVideoBench
                                              : VideoChoiceBenchmark::kMvBench;
    const auto r = score_video_choice(answers, read_video_choice_annotations(f.annotations, kind), kind);
    scored = r.total;
    report = make_report(r, kind);
  }
  if (scored == 0)
    usage_error("no answer in " + f.answers + " could be scored against " + f.annotations +
                " (wrong annotation file, or every record is an error record?)");
  std::cout << format_report(report, f.answers, answers.records.size());
  if (!f.json.empty()) {
    const std::string key = f.name.empty() ? b : f.name;
    std::vector<std::pair<std::string, std::string>> sources = {{"answers", f.answers}, {"annotations", f.annotations}};
    if (!f.questions.empty()) sources.emplace_back("questions", f.questions);
    write_results(f.json, key, f.method, answers.model_id(), report, sources, run);
    std::cout << "stored as benchmarks." << key << " in " << f.json << "\n";
  }
  return 0;
}

void write_text(const std::string& path, const std::string& text) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) usage_error("--json " + path + ": cannot write");
  const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (std::fclose(out) != 0 || !ok) usage_error("--json " + path + ": write failed");
}

MmeTotal mme_total(const Flags& f) { return f.mme == "total" ? MmeTotal::kPerceptionCognition : MmeTotal::kPerception; }

std::vector<std::string> listed_benchmarks(const Flags& f) {
  std::vector<std::string> benchmarks;
  for (const auto& b : f.benchmarks)
    if (!b.empty()) benchmarks.push_back(b);
  return benchmarks;
}

int run_compare(const Flags& f) {
  if (f.results.empty()) usage_error("compare needs --results (one results JSON per method and budget)");
  std::vector<MethodScores> runs;
  for (const auto& path : f.results) runs.push_back(read_results(path, mme_total(f)));
  MethodScores reference;
  if (!f.reference.empty()) {
    reference = read_results(f.reference, mme_total(f));
  } else {
    const size_t i = find_reference(runs);
    reference = runs[i];
    runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
  }
  const ComparisonTable table = compare_runs(reference, runs, listed_benchmarks(f), mme_total(f));
  std::cout << comparison_markdown(table);
  if (!f.retention_json.empty()) write_text(f.retention_json, comparison_json(table) + "\n");
  return 0;
}

int run_retention(const Flags& f) {
  if (f.reference.empty()) usage_error("retention needs --reference (the full model's results JSON)");
  if (f.results.empty()) usage_error("retention needs --results (one results JSON per method)");
  const MmeTotal mme = mme_total(f);
  const MethodScores reference = read_results(f.reference, mme);
  std::vector<MethodScores> methods;
  for (const auto& path : f.results) methods.push_back(read_results(path, mme));
  const RetentionTable table = retention(reference, methods, listed_benchmarks(f), mme);
  std::cout << format_retention(table);
  if (!f.retention_json.empty()) write_text(f.retention_json, retention_json(table) + "\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "era_score: score an answer JSONL against a benchmark's ground truth with LLaVA's official protocol.\n"
      "  era_score --benchmark B --answers FILE --annotations PATH [--json results.json]\n"
      "  era_score retention --reference full.json --results a.json b.json ...   (Avg. (%))\n"
      "  era_score compare --results results/*.json   (the papers' table: runs by budget, Avg. (%), visual tokens)"};
  app.add_option("--benchmark", f.benchmark,
                 "vqav2, textvqa, gqa, pope, mme, sqa, mmbench (or mmbench_cn), videomme, longvideobench, mvbench")
      ->check(CLI::IsMember(
          {"vqav2", "textvqa", "gqa", "pope", "mme", "sqa", "mmbench", "mmbench_cn", "videomme", "longvideobench", "mvbench"}));
  app.add_option("--answers", f.answers, "answer JSONL (question_id, prompt, text, ...; error records are skipped)");
  app.add_option("--annotations", f.annotations,
                 "ground truth: vqav2 v2_mscoco_val2014_annotations.json | textvqa TextVQA_0.5.1_val.json | gqa "
                 "testdev_balanced_questions.json | pope folder of coco_pope_<split>.json | mme "
                 "MME_Benchmark_release_version/ | sqa problems.json | mmbench mmbench_dev_*.tsv | videomme the "
                 "dataset's rows as JSON / JSON Lines | longvideobench lvb_val.json | mvbench rows {question_id, task, "
                 "answer, candidates} as JSON / JSON Lines");
  app.add_option("--questions", f.questions, "pope: the question JSONL (llava_pope_test.jsonl) giving each question's split");
  app.add_option("--split", f.split, "sqa: the problems.json split to score")->capture_default_str();
  app.add_option("--json", f.json, "add this score to a per-method results JSON (created or updated)");
  app.add_option("--name", f.name, "key of this score in the results JSON (default: the benchmark)");
  app.add_option("--method", f.method, "method name stored in the results JSON (default: the answers' model_id)");
  app.add_option("--upload", f.upload, "vqav2: write the EvalAI upload JSON here");
  app.add_option("--test-questions", f.test_questions,
                 "vqav2 --upload: the full test2015 question JSONL (unanswered questions get \"\")");

  auto* ret = app.add_subcommand("retention", "compare methods with the full model: per-benchmark ratios and Avg. (%)");
  ret->add_option("--reference", f.reference, "the full (unreduced) model's results JSON");
  ret->add_option("--results", f.results, "one results JSON per method")->expected(1, -1);
  ret->add_option("--benchmarks", f.benchmarks, "benchmark keys to average (default: all of the reference's)")
      ->delimiter(',')
      ->expected(1, -1);
  ret->add_option("--mme", f.mme, "MME entry: perception (LLaVA's tables) or total (Perception + Cognition)")
      ->check(CLI::IsMember({"perception", "total"}))
      ->capture_default_str();
  ret->add_option("--json", f.retention_json, "also write the table as JSON");

  auto* cmp = app.add_subcommand("compare",
                                 "the papers' side-by-side table (Markdown): runs grouped by budget under "
                                 "the full model's upper bound, one column per benchmark, Avg. (%), and "
                                 "the mean real visual tokens");
  cmp->add_option("--results", f.results,
                  "one results JSON per (method, budget) run (era_score --json of era_eval answers), any benchmarks "
                  "each; the full model's is the upper bound")
      ->expected(1, -1);
  cmp->add_option("--reference", f.reference, "the upper bound's results JSON (default: the one from method full)");
  cmp->add_option("--benchmarks", f.benchmarks, "benchmark columns, in order (default: all of the upper bound's)")
      ->delimiter(',')
      ->expected(1, -1);
  cmp->add_option("--mme", f.mme, "MME entry: perception (LLaVA's tables) or total (Perception + Cognition)")
      ->check(CLI::IsMember({"perception", "total"}))
      ->capture_default_str();
  cmp->add_option("--json", f.retention_json, "also write the table as JSON");

  return era::cli::run_tool("era_score", app, argc, argv, [&] {
    if (cmp->parsed()) return run_compare(f);
    return ret->parsed() ? run_retention(f) : run_benchmark(f);
  });
}
