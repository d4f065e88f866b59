// era_bench: where the time and memory of a request go, per reduction method and token budget,
// against the unreduced run, the ideal speed-up and (optionally) the eager PyTorch reference.
// The work is in src/apps/bench/; this file only maps flags to BenchOptions.
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "apps/bench/benchmark.h"
#include "apps/bench/machine_limits.h"
#include "apps/bench/python_reference.h"
#include "apps/cli/common_flags.h"
#include "apps/cli/entry.h"

int main(int argc, char** argv) {
  era::cli::ModelFlags model;
  era::cli::GenerationFlags reduction;  // only the ERA / baseline parameter flags are used
  era::bench::BenchOptions o;
  std::string json_path, dump_dir, py_script, interpreter = "/usr/bin/python3";
  CLI::App app{"era_bench: time, FLOPs and memory per reduction method and budget"};
  era::cli::add_model_flags(app, model);
  auto* image = app.add_option("-i,--image", o.image, "image file");
  auto* video =
      app.add_option("--video", o.video, "a video file or folder of frame images instead of an image (LLaVA-OneVision)");
  image->excludes(video);
  auto* frames =
      app.add_option("--frames", o.frames, "frames sampled from --video (default: a file's 16, a folder's every frame)")
          ->check(CLI::Range(1, era::Video::kMaxFrames));
  era::cli::add_video_fps_flag(app, o.video_fps, frames);
  app.add_option("-p,--prompt", o.prompt, "question")->capture_default_str();
  app.add_option("--methods", o.methods, era::cli::methods_help("reduction methods, comma-separated:"))
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--tokens", o.tokens, "visual-token budgets per image, comma-separated (every method but full)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, era::cli::kMaxTokens))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed requests per configuration")->check(CLI::Range(0, 10000))->capture_default_str();
  app.add_option("--repeat", o.repeat, "timed requests per configuration")->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("-n,--max-new-tokens", o.max_new_tokens, "tokens decoded per request (EOS ignored)")
      ->check(CLI::Range(int64_t{0}, era::cli::kMaxNewTokens))
      ->capture_default_str();
  app.add_option("--budget-scope", o.scope, "LLaVA-NeXT budget scope: crop or image")->capture_default_str();
  app.add_option("--era-config", reduction.era_config, "ERA options file (see configs/era.json)");
  app.add_option("--era-set", reduction.era_set, "set one ERA option, key=value; repeatable");
  app.add_option("--method-set", reduction.method_set, "set one competing-method option, key=value; repeatable");
  app.add_option("--profile-ops", o.profile_ops,
                 "after the timed requests, profile one more per configuration and show each stage's N costliest "
                 "operators (self time, LibTorch's profiler)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--vs-machine", o.vs_machine_seconds,
                 "before each timed request, time this CPU's GEMM (as --machine, in the dtype the vision tower's and "
                 "prefill's products run in) and then its memory read for this many seconds each, and show each "
                 "request's vision and prefill FLOP rates as shares of the first and its decode weight bytes per "
                 "second as a share of the second (0 = off)")
      ->check(era::cli::finite_in(0.0, 600.0));
  bool machine = false;
  app.add_flag("--machine", machine,
               "measure this machine's limits (GEMM rate per dtype, memory bandwidth) with LibTorch's kernels at "
               "--threads, print them and exit (no model needed)");
  double machine_seconds = 8.0;
  app.add_option("--machine-seconds", machine_seconds, "how long --machine measures in all")
      ->check(era::cli::finite_in(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--json", json_path, "also write the report as JSON to this file ('-' = stdout instead of the tables)");
  app.add_option("--dump-inputs", dump_dir, "write the pixels, prompt ids and kept tokens for the Python reference here");
  app.add_option("--python-reference", py_script, "run this script (tools/bench_python_reference.py) on the same inputs");
  app.add_option("--python", interpreter, "Python interpreter for --python-reference")->capture_default_str();
  return era::cli::run_tool("era_bench", app, argc, argv, [&] {
    if (machine) {
      std::cout << era::bench::format_machine(era::bench::measure_machine(model.threads, machine_seconds)) << std::flush;
      return 0;
    }
    if (model.model.empty()) throw era::Error(era::ErrorCode::kInvalidArgument, "a model bundle is required (-m)");
    if (!o.video.empty() && (!dump_dir.empty() || !py_script.empty())) {
      throw era::Error(era::ErrorCode::kInvalidArgument,
                       "--dump-inputs / --python-reference compare image requests only, not --video");
    }
    o.bundle_dir = model.model;
    o.session = era::cli::session_options(model);
    o.reduction = era::cli::base_request(reduction).reduction;
    const era::bench::BenchReport report = era::bench::run_benchmark(o);
    if (!dump_dir.empty()) era::bench::dump_inputs(report, dump_dir);
    nlohmann::json python;
    if (!py_script.empty()) {
      era::bench::PythonReferenceOptions po;
      po.script = py_script;
      po.python = interpreter;
      po.work_dir = dump_dir.empty()
                        ? (std::filesystem::temp_directory_path() / ("era_bench_" + std::to_string(::getpid()))).string()
                        : dump_dir;
      python = era::bench::run_python_reference(report, po);
      if (dump_dir.empty()) std::filesystem::remove_all(po.work_dir);
    }
    const auto j = era::bench::report_json(report, python);
    if (json_path == "-") {
      std::cout << j.dump(1) << std::endl;
      return 0;
    }
    std::cout << era::bench::format_tables(report, python) << std::flush;
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      if (!f) throw era::Error(era::ErrorCode::kInvalidArgument, json_path + ": cannot write");
      f << j.dump(1) << "\n";
    }
    return 0;
  });
}
