// era_eval: batch evaluation over a LLaVA question JSONL -> answers JSONL (LLaVA's format),
// sharded, resumable and robust to bad items; several methods and budgets side by side with one
// model load (--methods a,b --tokens 64,128 --answers-dir DIR); `era_eval merge` joins the chunks.
// Only flag parsing and printing live here; the runs themselves are the library's (eval/runner.h,
// eval/run_plan.h).
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "apps/cli/common_flags.h"
#include "apps/cli/entry.h"
#include "apps/eval/answer_file.h"
#include "apps/eval/merge.h"
#include "apps/eval/progress.h"
#include "apps/eval/question_file.h"
#include "apps/eval/run_plan.h"
#include "apps/eval/runner.h"
#include "era/era.h"

namespace {

struct Flags {
  // model, generation and reduction: the same flags as era_infer
  era::cli::ModelFlags model;
  era::cli::GenerationFlags gen;  // its single --method / --tokens are replaced by the lists below
  std::vector<std::string> methods{era::kUnreducedMethod};
  std::vector<int64_t> budgets;
  // the runs
  std::string questions, image_folder, answers, answers_dir, model_id;
  int64_t num_chunks = 1, chunk_idx = 0, batch_size = 1;
  int video_frames = 0;
  double video_fps = 0;
  int64_t log_every = 100;
  // merge
  std::vector<std::string> merge_inputs;
  std::string merge_output, merge_questions;
  bool drop_errors = false;
};

using era::cli::kExitFailed;
using era::cli::kExitOk;
using era::cli::kExitRefused;

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

void on_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}

// SIGINT / SIGTERM (Slurm's notice before SIGKILL): finish the current batch, then stop. The
// handler is one-shot, so a second signal ends the process at once; the file stays safe either way.
void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// One --answers file: exactly the flags as given (a single method and budget, even "full" with
// --tokens). --answers-dir: every method at every budget (eval/run_plan.h).
std::vector<era::eval::PlannedRun> plan(const Flags& f) {
  if (!f.answers.empty() && !f.answers_dir.empty()) {
    throw era::Error(era::ErrorCode::kInvalidArgument, "give --answers (one run) or --answers-dir (one file per run), not both");
  }
  std::vector<era::eval::PlannedRun> runs = era::eval::plan_runs(f.methods, f.budgets, f.answers_dir);
  if (f.answers.empty()) return runs;
  if (f.methods.size() != 1 || f.budgets.size() > 1) {
    throw era::Error(era::ErrorCode::kInvalidArgument,
                     "several --methods or --tokens need --answers-dir (one answers file per run) instead of --answers");
  }
  runs[0].tokens = f.budgets.empty() ? 0 : f.budgets[0];
  runs[0].answers = f.answers;
  return runs;
}

era::eval::EvalConfig make_config(const Flags& f, const era::eval::PlannedRun& run) {
  era::eval::EvalConfig config;
  config.questions = f.questions;
  config.image_folder = f.image_folder;
  config.video_frames = f.video_frames;
  config.video_fps = f.video_fps;
  config.answers = run.answers;
  config.model_id = f.model_id;
  config.num_chunks = f.num_chunks;
  config.chunk_idx = f.chunk_idx;
  config.batch_size = f.batch_size;
  config.request = era::cli::base_request(f.gen);
  config.request.use_template = true;
  config.request.reduction.method = run.method;
  config.request.reduction.tokens = run.tokens;
  return config;
}

void print_summary(const era::eval::PlannedRun& run, bool several, const era::eval::EvalSummary& s) {
  std::string visual = "no answers";
  if (s.visual_token_answers > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", s.visual_tokens_mean);
    visual = buf;
  }
  std::fprintf(stderr,
               "era_eval: %s%s%s: %lld answered, %lld skipped (already answered), %lld errors; %lld questions in this "
               "chunk; mean visual tokens %s -> %s\n",
               several ? run.label().c_str() : "", several ? ": " : "", s.interrupted ? "interrupted" : "done",
               static_cast<long long>(s.answered), static_cast<long long>(s.skipped), static_cast<long long>(s.errors),
               static_cast<long long>(s.questions), visual.c_str(), run.answers.c_str());
}

int run(const Flags& f) {
  const std::vector<era::eval::PlannedRun> runs = plan(f);
  std::vector<era::eval::EvalConfig> configs;
  for (const auto& r : runs) {
    configs.push_back(make_config(f, r));
    era::cli::validate_flags(configs.back().request);  // every run's, before any work
  }
  const bool several = runs.size() > 1;

  era::eval::ProgressOptions po;
  po.terminal = ::isatty(STDERR_FILENO) != 0;
  po.log_every = f.log_every;
  std::unique_ptr<era::eval::Progress> progress;
  era::eval::EvalHooks hooks;
  hooks.stop = &g_stop;
  hooks.on_message = [&](const std::string& line) {
    if (progress) {
      progress->message(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  };
  hooks.on_start = [&](int64_t todo) {
    progress = std::make_unique<era::eval::Progress>(stderr, todo, po);
    progress->update(0, 0);
  };
  hooks.on_progress = [&](int64_t done, int64_t, int64_t errors) {
    if (progress) progress->update(done, errors);
  };
  // Everything that can be checked without the model, before it loads: the question file (UTF-8
  // JSON lines, read as a whole) and every answers file's run lock, so a second era_eval on the
  // same file is refused at once and a bad bundle below leaves no answers file behind.
  (void)era::eval::read_questions(f.questions);
  std::vector<std::unique_ptr<era::eval::AnswersLock>> locks;
  for (const auto& r : runs) {
    const std::filesystem::path parent = std::filesystem::path(r.answers).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
    locks.push_back(std::make_unique<era::eval::AnswersLock>(r.answers));
  }
  // A signal during the load is kept and acted on once the load returns (LibTorch cannot be
  // interrupted part-way): the same "interrupted" summary and 128+signal as during the run.
  install_signal_handlers();
  std::fprintf(stderr, "era_eval: loading the model %s\n", f.model.model.c_str());
  auto session =
      std::make_shared<std::optional<era::Session>>(era::Session::open(f.model.model, era::cli::session_options(f.model)));
  if (g_stop.load()) {
    for (const auto& r : runs) {
      era::eval::EvalSummary nothing;
      nothing.interrupted = true;
      print_summary(r, several, nothing);
    }
    std::fprintf(stderr, "era_eval: stopped by a signal while loading the model; rerun the same command to start\n");
    return 128 + g_signal.load();
  }
  const era::ModelInfo model = (*session)->info();
  for (const auto& c : configs) era::cli::validate_flags(c.request, &model);  // the model-dependent limits (-n)
  const auto open_backend = era::eval::shared_backend([session]() { return era::eval::session_backend(std::move(**session)); });
  bool items_failed = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (several) std::fprintf(stderr, "era_eval: run %zu of %zu: %s\n", i + 1, runs.size(), runs[i].label().c_str());
    const era::eval::EvalSummary s = era::eval::run_eval(configs[i], open_backend, hooks);
    if (progress) progress->finish();
    progress.reset();
    print_summary(runs[i], several, s);
    if (s.interrupted) {
      std::fprintf(stderr, "era_eval: stopped by a signal; rerun the same command to continue\n");
      return 128 + g_signal.load();
    }
    if (s.errors > 0) {
      std::fprintf(stderr,
                   "era_eval: %lld question(s) failed; their error records (with an \"error\" field) are in %s; "
                   "fix the cause and rerun the same command to try them again\n",
                   static_cast<long long>(s.errors), runs[i].answers.c_str());
      items_failed = true;
    }
  }
  return items_failed ? kExitFailed : kExitOk;
}

int merge(const Flags& f) {
  era::eval::MergeOptions mo;
  mo.drop_errors = f.drop_errors;
  if (!f.merge_questions.empty()) {
    mo.expected_questions = static_cast<int64_t>(era::eval::read_questions(f.merge_questions).size());
  }
  const auto s = era::eval::merge_answer_files(f.merge_inputs, f.merge_output, mo);
  std::fprintf(stderr, "era_eval merge: %zu file(s) -> %s: %lld records (%lld answers, %lld error records%s)\n",
               f.merge_inputs.size(), f.merge_output.c_str(), static_cast<long long>(s.records),
               static_cast<long long>(s.answers), static_cast<long long>(s.errors), f.drop_errors ? " left out" : "");
  if (s.errors > 0) {
    std::fprintf(stderr, "era_eval merge: %lld question(s) have error records instead of answers; rerun their chunks to retry\n",
                 static_cast<long long>(s.errors));
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "era_eval: answer a LLaVA question file (JSONL) with a model bundle, writing LLaVA-format answers; "
      "sharded (--num-chunks/--chunk-idx), resumable (rerun the same command) and robust to bad items"};
  era::cli::add_model_flags(app, f.model);
  app.add_option("--questions,--question-file", f.questions, "question JSONL: question_id, image, text[, category] per line");
  app.add_option("--image-folder", f.image_folder, "folder the questions' image (and video) paths are relative to");
  auto* frames = app.add_option("--frames", f.video_frames,
                                "frames per question \"video\": sampled uniformly from a video file (default 16), or from a "
                                "folder of frame images (default: all of them)")
                     ->check(CLI::Range(1, era::Video::kMaxFrames));
  era::cli::add_video_fps_flag(app, f.video_fps, frames);
  app.add_option("--answers,--answers-file", f.answers, "answers JSONL to write (resumed if it exists); one run only");
  app.add_option("--answers-dir", f.answers_dir,
                 "folder for one answers JSONL per (method, budget) run: <method>_<tokens>.jsonl, full.jsonl "
                 "(':' and other unsafe characters written as '-'); each resumed if it exists");
  app.add_option("--model-id", f.model_id, "model_id written in every answer (default: the bundle's model name)");
  app.add_option("--num-chunks", f.num_chunks, "split the questions into this many chunks (LLaVA's split_list)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--chunk-idx", f.chunk_idx, "which chunk this run answers (0-based)")
      ->check(CLI::Range(int64_t{0}, (int64_t{1} << 20) - 1))
      ->capture_default_str();
  app.add_option("--batch-size", f.batch_size, "questions per Session::generate_batch call")
      ->check(CLI::Range(int64_t{1}, int64_t{256}))
      ->capture_default_str();
  app.add_option("--log-every", f.log_every, "when stderr is not a terminal: a progress line every N items (and every 10 s)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  era::cli::add_generation_flags(app, f.gen);  // sampling: question line i uses --seed + i
  // era_eval takes lists where era_infer takes one method and one budget.
  app.remove_option(app.get_option("--method"));
  app.remove_option(app.get_option("--tokens"));
  app.add_option("--method,--methods", f.methods,
                 era::cli::methods_help("visual-token reduction(s), comma-separated ('full' ignores --tokens and runs once):"))
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--tokens", f.budgets,
                 "visual tokens to keep per image, comma-separated budgets (e.g. 64,128; LLaVA-NeXT: nominal, 160 = 32 "
                 "per crop); every method runs at every budget")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, era::cli::kMaxTokens));

  CLI::App* merge_cmd = app.add_subcommand("merge",
                                           "join chunk answer files (in chunk order), checking that no question "
                                           "line is missing or answered twice");
  merge_cmd->add_option("--inputs", f.merge_inputs, "chunk answer files, in chunk order")->required();
  merge_cmd->add_option("-o,--output", f.merge_output, "merged answers file")->required();
  merge_cmd->add_option("--questions,--question-file", f.merge_questions,
                        "question file: also check that every one of its questions has a record");
  merge_cmd->add_flag("--drop-errors", f.drop_errors, "leave error records out of the output");
  app.require_subcommand(0, 1);
  const auto who = [&] { return std::string(merge_cmd->parsed() ? "era_eval merge" : "era_eval"); };
  return era::cli::run_tool(who, app, argc, argv, [&] {
    if (merge_cmd->parsed()) return merge(f);
    std::string missing;
    for (const auto& [value, flag] : {std::pair{&f.model.model, "-m/--model"}, std::pair{&f.questions, "--questions"},
                                      std::pair{&f.image_folder, "--image-folder"}}) {
      if (value->empty()) missing += std::string(missing.empty() ? "" : ", ") + flag;
    }
    if (f.answers.empty() && f.answers_dir.empty())
      missing += std::string(missing.empty() ? "" : ", ") + "--answers or --answers-dir";
    if (!missing.empty()) throw era::Error(era::ErrorCode::kInvalidArgument, "missing " + missing + " (see --help)");
    return run(f);
  });
}
