#pragma once
// era_bench's engine: where the time and memory of a request go, per reduction method and budget,
// against the unreduced run, the ideal (token and FLOPs ratios) and the eager PyTorch reference.
//
// For every configuration (method x budget; "full" once) it runs `warmup` untimed requests and
// `repeat` timed ones through Session::generate (greedy, EOS ignored so every run decodes exactly
// max_new_tokens), and keeps the per-stage times of the library's Stats, the token counts, the KV
// cache size, the analytic FLOPs (bench/flops.h) and the peak memory above the resident baseline
// (bench/memory.h). Methods are plain strings handed to ReductionRequest::method, so any method
// the library knows can be benchmarked; an unknown one fails as the library reports it.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <torch/script.h>
#include "apps/bench/flops.h"
#include "apps/bench/op_profile.h"

#include "era/era.h"

namespace era::bench {

struct BenchOptions {
  std::string bundle_dir, image, prompt = "Describe the image in detail.";
  // Instead of `image`: a video file or folder of frames (Video::from_path), `frames` of it
  // (0: a file's 16, a folder's every frame).
  std::string video;
  int frames = 0;
  double video_fps = 0;  // or sampled at this rate (Video::from_path)
  std::vector<std::string> methods{kUnreducedMethod, "era"};
  std::vector<int64_t> tokens{64};  // budgets for every method but "full"
  int warmup = 1, repeat = 3;
  int64_t max_new_tokens = 16;
  SessionOptions session;
  ReductionRequest reduction;  // ERA / baseline parameters shared by all configurations
  std::string scope = "crop";
  // > 0: after the timed requests, one more per configuration under LibTorch's profiler; the
  // tables show each stage's `profile_ops` costliest operators (bench/op_profile.h).
  int profile_ops = 0;
  // > 0 (era_bench --vs-machine, CPU only): before each timed request, the machine's GEMM rate is
  // timed for this many seconds (bench/machine_limits.h, GemmProbe) in the dtype the vision
  // tower's and prefill's products run in (float32 where they are widened), then its memory read
  // rate for as long (ReadProbe); each request's vision and prefill FLOP rates are given as shares
  // of the first, its decode weight bytes per second as a share of the second
  // (ConfigResult::vs_machine).
  double vs_machine_seconds = 0;
};

// Order statistics of one timed quantity over the repeats.
struct Spread {
  double median = 0, min = 0, max = 0, q1 = 0, q3 = 0;
  static Spread of(std::vector<double> values);
};

struct ConfigResult {
  std::string method;
  int64_t budget = 0;  // nominal tokens asked for; 0 = all ("full")
  int64_t crops = 0, visual_tokens = 0, text_tokens = 0, prompt_tokens = 0, generated_tokens = 0;
  FlopCount flops;
  std::map<std::string, Spread> ms;  // preprocess, vision, reduce, prefill, decode_per_token, total
  int64_t kv_cache_bytes = 0, kv_cache_allocated_bytes = 0;
  int64_t peak_bytes = 0;                // highest resident / allocated bytes during the timed runs
  int64_t peak_over_baseline_bytes = 0;  // minus what was resident before them (model + runtime)
  // What one timed request handed the decoder, for the Python reference (era_bench --dump-inputs).
  std::vector<ImageReduction> reductions;
  OpProfile profile;  // BenchOptions::profile_ops > 0
  // BenchOptions::vs_machine_seconds > 0: "gemm_gflops" (the rate timed before each timed
  // request), "vision_share" ((vision + projector) FLOPs / vision ms, over that request's GEMM
  // rate) and "prefill_share"; "read_gbs" (the memory read rate timed before each request) and,
  // where a request decoded more than one token, "decode_share" (BenchReport::decode_weight_bytes
  // per decode step's mean time, over that request's read rate); the shares are fractions.
  std::map<std::string, Spread> vs_machine;
  std::string label() const;  // "full", "era@64"
};

struct BenchReport {
  BenchOptions options;
  ModelInfo model;
  ModelDims dims;
  std::string memory_kind;
  bool peak_per_configuration = true;  // false: the OS refused to reset the peak (lifetime peak)
  int64_t resident_before_open = 0, resident_after_open = 0;
  int64_t peak_during_open = 0;     // the high-water mark while the bundle loaded (int8: packing)
  int64_t resident_after_runs = 0;  // after every configuration ran: mapped weights count once touched
  int64_t weight_bytes = 0;         // the model's weights as held (model_weight_bytes)
  double open_ms = 0;               // Session::open: reading, converting and checking the model
  int64_t huge_page_bytes = 0;      // decoder weights moved into huge pages at load (model/huge_pages.h)
  int64_t resident_huge_pages = 0;  // the process's memory in huge pages after the load (what Linux granted)
  int threads = 0;
  int kernel_threads = 0;           // era's decode kernel (util/kernel_threads.h): more than `threads` beside a pthread OpenBLAS
  int64_t cpu_upcast_min_rows = 0;  // SessionOptions::cpu_matmul in effect: 0 = the model's dtype throughout
  bool optimize_graphs = true;      // SessionOptions::jit_optimize in effect (model/graph_optimizer.h)
  int onednn_packed_linears = 0;    // vision / projector linears packed for oneDNN at load (model/onednn_linear.h)
  int row_split_linears = 0;        // ... or run plain with their rows split between the threads (LibTorch 1.13)
  std::string int8_engine;          // int8 bundles: the quantisation engine ("era": weight-only); empty otherwise
  std::string int8_scheme;          // int8 bundles: "weight-only" or "dynamic" (manifest quantization.int8_scheme)
  int64_t int8_sources_freed = 0;   // int8 bundles: bytes of the engine's spare weight copies freed
  std::string vs_machine_dtype;     // BenchOptions::vs_machine_seconds > 0: the dtype of the GEMM timed
  bool vs_machine_packed = false;   // ... and whether its rate is the faster of plain and oneDNN-packed (bench/machine_limits.h)
  double decode_weight_bytes = 0;   // ... and the weight bytes one decode step reads (bench/flops.h, decode_step_weights)
  std::vector<ConfigResult> rows;
  PreparedInput input;         // the request's preprocessed image and prompt ids (same for every row)
  torch::Tensor pixel_values;  // float32 [crops, 3, S, S], what the vision tower got
};

// Runs every configuration; throws era::Error (bad bundle, image, method, option).
BenchReport run_benchmark(const BenchOptions& options);

// The row of method "full", if measured.
const ConfigResult* full_row(const BenchReport& report);

// JSON of the whole report (schema: docs/perf/README.md). `python` (may be null): the output of
// tools/bench_python_reference.py, merged per row with C++/Python ratios.
nlohmann::json report_json(const BenchReport& report, const nlohmann::json& python = nullptr);

// The human-readable tables.
std::string format_tables(const BenchReport& report, const nlohmann::json& python = nullptr);

// Writes what the Python reference needs to replay the same requests into `dir`: pixel_values.npy
// (float32 [crops,3,S,S]) and inputs.json (prompt ids, image token id, per row: label, method,
// visual tokens, kept indices and LAR biases). Throws era::Error(kInvalidArgument) if unwritable.
void dump_inputs(const BenchReport& report, const std::string& dir);

}  // namespace era::bench
