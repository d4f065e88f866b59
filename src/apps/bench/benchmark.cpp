#include "apps/bench/benchmark.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "apps/bench/machine_limits.h"
#include "apps/bench/memory.h"
#include "era/debug.h"
#include "kernels/huge_pages.h"
#include "model/cpu_matmul.h"
#include "model/int8_weights.h"
#include "pipeline/session_internals.h"
#include "reduce/registry.h"
#include "report/result_json.h"
#include "util/kernel_threads.h"
#include "util/npy.h"
#include "util/stopwatch.h"

namespace era::bench {
namespace {

// Linear interpolation between order statistics (numpy's default percentile).
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

struct Config {
  std::string method;
  int64_t budget = 0;
};

std::vector<Config> configurations(const BenchOptions& o) {
  if (o.methods.empty()) throw Error(ErrorCode::kInvalidArgument, "no methods given");
  std::vector<Config> out;
  for (const auto& m : o.methods) {
    if (m.empty()) throw Error(ErrorCode::kInvalidArgument, "empty method name in the method list");
    if (is_unreduced_method(m)) {
      out.push_back({m, 0});
      continue;
    }
    if (o.tokens.empty()) throw Error(ErrorCode::kInvalidArgument, "method '" + m + "' needs at least one token budget");
    for (int64_t k : o.tokens) {
      if (k <= 0) throw Error(ErrorCode::kInvalidArgument, "token budget must be > 0, got " + std::to_string(k));
      out.push_back({m, k});
    }
  }
  return out;
}

Request make_request(const BenchOptions& o, const Config& c) {
  Request r;
  if (!o.image.empty()) r.images = {o.image};
  if (!o.video.empty()) r.videos = {Video::from_path(o.video, o.frames, o.video_fps)};
  r.prompt = o.prompt;
  r.max_new_tokens = o.max_new_tokens;
  r.temperature = 0.0f;
  r.stop_at_eos = false;  // every run decodes exactly max_new_tokens: comparable decode times
  r.reduction = o.reduction;
  r.reduction.method = c.method;
  r.reduction.tokens = c.budget;
  r.reduction.keep_ratio = 0.0f;
  r.reduction.scope = o.scope;
  return r;
}

// What --vs-machine times before each timed request: the GEMM of the dtype the big products run
// in, and the memory read; and the weight bytes a decode step streams.
struct VsMachine {
  VsMachine(torch::ScalarType gemm_dtype, double decode_bytes) : gemm(gemm_dtype), decode_weight_bytes(decode_bytes) {}
  GemmProbe gemm;
  ReadProbe read;
  double decode_weight_bytes;
};

// Each timed request's rate in `stage` (`work` GFLOP or GB in stage_ms) over the machine's rate
// timed just before it.
Spread shares_of_peak(const std::vector<double>& stage_ms, double work, const std::vector<double>& peak_rates) {
  std::vector<double> shares;
  for (size_t i = 0; i < stage_ms.size() && i < peak_rates.size(); ++i) {
    if (stage_ms[i] > 0 && peak_rates[i] > 0) shares.push_back(work / (stage_ms[i] / 1e3) / peak_rates[i]);
  }
  return Spread::of(shares);
}

ConfigResult measure(Session& session, const BenchOptions& o, const Config& c, const PreparedInput& in, const ModelDims& dims,
                     MemoryProbe& memory, bool& peak_per_configuration, const VsMachine* probe) {
  const Request request = make_request(o, c);
  for (int i = 0; i < o.warmup; ++i) session.generate(request);  // TorchScript profiling runs, caches

  ConfigResult row;
  row.method = c.method;
  row.budget = c.budget;
  for (auto v : in.crops_per_image) row.crops += v;
  std::map<std::string, std::vector<double>> samples;
  if (!memory.reset_peak()) peak_per_configuration = false;
  const int64_t baseline = memory.current();
  EarlyLayers early;  // what the first decoder layers saw, for FastV / DART
  std::vector<double> peak_gflops, read_gbs;
  for (int i = 0; i < o.repeat; ++i) {
    if (probe) {
      peak_gflops.push_back(probe->gemm.gflops(o.vs_machine_seconds));
      read_gbs.push_back(probe->read.gbs(o.vs_machine_seconds));
    }
    Result r = session.generate(request);
    const Stats& s = r.stats;
    for (const auto& stage : stage_times()) {
      if (stage.ms != &Stats::decode_ms) samples[stage.name].push_back(s.*stage.ms);
    }
    samples["decode_per_token"].push_back(mean_of(s.decode_step_ms));
    row.visual_tokens = s.visual_tokens;
    row.text_tokens = s.text_tokens;
    row.prompt_tokens = s.prompt_tokens;
    row.generated_tokens = s.generated_tokens;
    row.kv_cache_bytes = s.kv_cache_bytes;
    row.kv_cache_allocated_bytes = s.kv_cache_allocated_bytes;
    row.reductions = std::move(r.reductions);
    if (s.visual_tokens_early_layers != s.visual_tokens) {  // in-decoder pruning after layer K
      const MethodSpec& method = find_method(request.reduction.method);
      early = {method.pruning_layer(request.reduction.baselines), s.text_tokens + s.visual_tokens_early_layers};
    }
  }
  row.peak_bytes = memory.peak();
  row.peak_over_baseline_bytes = std::max<int64_t>(0, row.peak_bytes - baseline);
  for (auto& [name, v] : samples) row.ms[name] = Spread::of(v);
  if (o.profile_ops > 0) {  // a run of its own: the profiler's overhead stays out of the timings
    OpProfiler profiler;
    session.generate(request);
    row.profile = profiler.stop();
  }
  row.flops = count_flops(dims, row.crops, row.prompt_tokens, row.generated_tokens, early, in.grids);
  if (probe) {
    row.vs_machine["gemm_gflops"] = Spread::of(peak_gflops);
    row.vs_machine["vision_share"] =
        shares_of_peak(samples["vision"], (row.flops.vision + row.flops.projector) / 1e9, peak_gflops);
    row.vs_machine["prefill_share"] = shares_of_peak(samples["prefill"], row.flops.prefill / 1e9, peak_gflops);
    row.vs_machine["read_gbs"] = Spread::of(read_gbs);
    if (row.generated_tokens > 1) {  // one token: no decode step
      row.vs_machine["decode_share"] = shares_of_peak(samples["decode_per_token"], probe->decode_weight_bytes / 1e9, read_gbs);
    }
  }
  return row;
}

nlohmann::json spread_json(const Spread& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"q1", s.q1}, {"q3", s.q3}};
}

const nlohmann::json* python_row(const nlohmann::json& python, const std::string& label) {
  if (!python.is_object() || !python.contains("rows")) return nullptr;
  for (const auto& r : python["rows"]) {
    if (r.value("label", "") == label) return &r;
  }
  return nullptr;
}

// The Python reference feeds only the tokens a method kept through every decoder layer; an
// in-decoder method (FastV, DART) runs all of them through layers < K in C++. Their timings are not
// the same work, so no C++/Python ratio is given for those rows.
bool comparable_with_python(const ConfigResult& row) { return method_info(row.method).stage != MethodStage::kInDecoder; }
constexpr const char* kNotComparable =
    "in-decoder method: the Python reference prefills only the kept tokens, C++ every token up to layer K";

double py_median(const nlohmann::json& row, const char* key) {
  if (!row.contains(key) || !row[key].is_object()) return 0;
  return row[key].value("median", 0.0);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

Spread Spread::of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = percentile(v, 0.5);
  s.q1 = percentile(v, 0.25);
  s.q3 = percentile(v, 0.75);
  return s;
}

std::string ConfigResult::label() const { return budget > 0 ? method + "@" + std::to_string(budget) : method; }

BenchReport run_benchmark(const BenchOptions& options) {
  if (options.repeat < 1) throw Error(ErrorCode::kInvalidArgument, "--repeat must be >= 1");
  if (options.warmup < 0) throw Error(ErrorCode::kInvalidArgument, "--warmup must be >= 0");
  if (options.max_new_tokens < 1) throw Error(ErrorCode::kInvalidArgument, "--max-new-tokens must be >= 1");
  if (options.image.empty() == options.video.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "give one image (-i) or one video (--video)");
  }
  const auto configs = configurations(options);
  if (options.vs_machine_seconds > 0 && options.session.device != "cpu") {
    throw Error(ErrorCode::kInvalidArgument,
                "--vs-machine times the CPU's GEMM, but the model runs on " + options.session.device);
  }

  BenchReport report;
  report.options = options;
  MemoryProbe memory(options.session.device);
  report.memory_kind = memory.what();
  report.resident_before_open = memory.current();
  Stopwatch open_clock;
  Session session = Session::open(options.bundle_dir, options.session);
  report.open_ms = open_clock.elapsed_ms();
  report.resident_after_open = memory.current();
  report.peak_during_open = memory.peak();
  report.model = session.info();
  report.dims = model_dims(SessionAccess::state(session).bundle.manifest);
  report.threads = at::get_num_threads();
  report.kernel_threads = kernel_threads();
  report.cpu_upcast_min_rows =
      cpu_upcast_min_rows(SessionAccess::state(session).bundle, parse_cpu_matmul(options.session.cpu_matmul));
  const ModelBundle& bundle = SessionAccess::state(session).bundle;
  report.optimize_graphs = bundle.optimize_graphs;
  report.onednn_packed_linears = bundle.onednn_packed_linears;
  report.row_split_linears = bundle.row_split_linears;
  report.huge_page_bytes = bundle.huge_page_bytes;
  report.resident_huge_pages = resident_huge_page_bytes();
  report.weight_bytes = model_weight_bytes(SessionAccess::state(session).bundle);
  if (!bundle.manifest.int8_weights.empty()) {
    // weight-only int8 linears run era's own kernel (model/int8_linear.h), not an engine
    report.int8_engine = bundle.manifest.int8_scheme == "weight-only" ? "era" : int8_engine_name();
    report.int8_scheme = bundle.manifest.int8_scheme;
  }
  report.int8_sources_freed = bundle.int8_sources_freed;
  debug::PreparedTensors prepared = debug::prepare(session, make_request(options, configs.front()));
  report.pixel_values = prepared.pixel_values;
  report.input = std::move(prepared);
  std::optional<VsMachine> probe;
  if (options.vs_machine_seconds > 0) {
    const bool float32 = cpu_matmuls_in_float32(bundle, parse_cpu_matmul(options.session.cpu_matmul));
    // int8 weights: one byte each (their float32 scales, one per output row, are left out: under
    // 0.1 % of the bytes at real widths)
    const bool int8 = !bundle.manifest.int8_weights.empty();
    const double bytes = decode_step_weights(report.dims) * (int8 ? 1.0 : static_cast<double>(torch::elementSize(bundle.dtype)));
    probe.emplace(float32 ? torch::kFloat : bundle.dtype, bytes);
    report.vs_machine_dtype = dtype_name(probe->gemm.dtype());
    report.vs_machine_packed = probe->gemm.packs();
    report.decode_weight_bytes = bytes;
  }
  for (const auto& c : configs) {
    report.rows.push_back(measure(session, options, c, report.input, report.dims, memory, report.peak_per_configuration,
                                  probe ? &*probe : nullptr));
  }
  report.resident_after_runs = memory.current();
  return report;
}

const ConfigResult* full_row(const BenchReport& report) {
  for (const auto& r : report.rows) {
    if (is_unreduced_method(r.method)) return &r;
  }
  return nullptr;
}

nlohmann::json report_json(const BenchReport& report, const nlohmann::json& python) {
  const auto& o = report.options;
  const auto& d = report.dims;
  nlohmann::json j;
  j["bundle"] = o.bundle_dir;
  j["image"] = o.image;
  if (!o.video.empty()) {
    j["video"] = o.video;
    j["frames"] = report.rows.empty() ? 0 : report.rows.front().crops;
  }
  j["prompt"] = o.prompt;
  j["device"] = report.model.device;
  j["dtype"] = report.model.dtype;
  j["threads"] = report.threads;
  j["kernel_threads"] = report.kernel_threads;
  if (!report.model.performance_note.empty()) j["performance_note"] = report.model.performance_note;
  j["cpu_matmul"] = {{"mode", o.session.cpu_matmul},
                     {"float32_from_rows", report.cpu_upcast_min_rows},
                     {"onednn_packed_linears", report.onednn_packed_linears},
                     {"row_split_linears", report.row_split_linears}};
  j["jit_optimize"] = {{"mode", o.session.jit_optimize}, {"optimize_graphs", report.optimize_graphs}};
  if (!report.int8_engine.empty()) {
    j["int8"] = {
        {"engine", report.int8_engine}, {"scheme", report.int8_scheme}, {"freed_weight_copies_bytes", report.int8_sources_freed}};
  }
  j["warmup"] = o.warmup;
  j["repeat"] = o.repeat;
  j["max_new_tokens"] = o.max_new_tokens;
  j["model"] = {{"name", report.model.name},
                {"arch", report.model.arch},
                {"attention", report.model.attention},
                {"decoder", report.model.decoder},
                {"vision", report.model.vision},
                {"vision_hidden", d.vision_hidden},
                {"vision_intermediate", d.vision_intermediate},
                {"vision_layers_run", d.vision_layers_run},
                {"num_patches", d.num_patches},
                {"hidden", d.hidden},
                {"intermediate", d.intermediate},
                {"layers", d.layers},
                {"heads", d.heads},
                {"kv_heads", d.kv_heads},
                {"head_dim", d.head_dim},
                {"vocab", d.vocab}};
  j["memory"] = {{"kind", report.memory_kind},
                 {"peak_per_configuration", report.peak_per_configuration},
                 {"resident_before_open_bytes", report.resident_before_open},
                 {"resident_after_open_bytes", report.resident_after_open},
                 {"peak_during_open_bytes", report.peak_during_open},
                 {"model_resident_bytes", report.resident_after_open - report.resident_before_open},
                 {"resident_after_runs_bytes", report.resident_after_runs},
                 {"model_weight_bytes", report.weight_bytes},
                 {"open_ms", report.open_ms},
                 {"huge_page_weight_bytes", report.huge_page_bytes},
                 {"resident_huge_page_bytes", report.resident_huge_pages}};
  const ConfigResult* full = full_row(report);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : report.rows) {
    nlohmann::json row;
    row["label"] = r.label();
    row["method"] = r.method;
    row["budget"] = r.budget;
    row["crops"] = r.crops;
    row["visual_tokens"] = r.visual_tokens;
    row["text_tokens"] = r.text_tokens;
    row["prompt_tokens"] = r.prompt_tokens;
    row["generated_tokens"] = r.generated_tokens;
    row["flops"] = {{"vision", r.flops.vision},
                    {"projector", r.flops.projector},
                    {"prefill", r.flops.prefill},
                    {"decode_per_token", r.flops.decode_per_token},
                    {"total", r.flops.total()}};
    nlohmann::json ms;
    for (const auto& [name, s] : r.ms) ms[name] = spread_json(s);
    row["ms"] = ms;
    row["kv_cache_bytes"] = r.kv_cache_bytes;
    row["kv_cache_allocated_bytes"] = r.kv_cache_allocated_bytes;
    row["peak_bytes"] = r.peak_bytes;
    row["peak_over_baseline_bytes"] = r.peak_over_baseline_bytes;
    if (full) {
      const double fp = full->ms.at("prefill").median, ft = full->ms.at("total").median;
      row["speedup"] = {{"prefill", fp / r.ms.at("prefill").median},
                        {"total", ft / r.ms.at("total").median},
                        {"decode_per_token", full->ms.at("decode_per_token").median / r.ms.at("decode_per_token").median},
                        {"ideal_tokens", static_cast<double>(full->prompt_tokens) / static_cast<double>(r.prompt_tokens)},
                        {"ideal_flops", full->flops.prefill / r.flops.prefill}};
      row["reduce_pct_of_full_prefill"] = 100.0 * r.ms.at("reduce").median / fp;
    }
    if (python_row(python, r.label()) != nullptr && !comparable_with_python(r)) {
      row["python"] = {{"not_compared", kNotComparable}};
    } else if (const auto* p = python_row(python, r.label())) {
      nlohmann::json py = *p;
      const double pp = py_median(*p, "prefill_ms"), pd = py_median(*p, "decode_ms_per_token");
      py["cpp_over_python"] = {{"prefill", pp > 0 ? r.ms.at("prefill").median / pp : 0.0},
                               {"decode_per_token", pd > 0 ? r.ms.at("decode_per_token").median / pd : 0.0}};
      row["python"] = py;
    }
    if (!r.vs_machine.empty()) {
      nlohmann::json vm = {{"gemm_dtype", report.vs_machine_dtype},
                           {"gemm_shape", {GemmProbe::kM, GemmProbe::kK, GemmProbe::kN}},
                           {"gemm_packed_too", report.vs_machine_packed},
                           {"decode_weight_bytes", report.decode_weight_bytes}};
      for (const auto& [name, s] : r.vs_machine) vm[name] = spread_json(s);
      row["vs_machine"] = vm;
    }
    if (!r.profile.ops.empty()) {
      nlohmann::json ops = nlohmann::json::array(), stages = nlohmann::json::array();
      for (const auto& s : r.profile.stages) stages.push_back({{"stage", s.stage}, {"calls", s.calls}, {"ms", s.ms}});
      for (const auto& op : r.profile.ops) {
        ops.push_back({{"stage", op.stage}, {"op", op.op}, {"calls", op.calls}, {"self_ms", op.self_ms}});
      }
      row["op_profile"] = {{"stages", stages}, {"ops", ops}};
    }
    rows.push_back(row);
  }
  j["rows"] = rows;
  if (python.is_object()) j["python_reference"] = {{"torch", python.value("torch", "")}, {"threads", python.value("threads", 0)}};
  return j;
}

std::string format_tables(const BenchReport& report, const nlohmann::json& python) {
  const auto& o = report.options;
  const auto& d = report.dims;
  std::ostringstream out;
  out << "era_bench: " << report.model.name << " (" << report.model.arch << ", " << report.model.dtype << ", "
      << report.model.device << ", " << report.threads << " threads"
      << (report.kernel_threads != report.threads ? " (era's decode kernel " + std::to_string(report.kernel_threads) + ")" : "")
      << (report.cpu_upcast_min_rows == 1  ? ", matmuls in float32"
          : report.cpu_upcast_min_rows > 1 ? ", float32 matmuls from " + std::to_string(report.cpu_upcast_min_rows) + " rows"
                                           : "")
      << (report.onednn_packed_linears > 0
              ? ", " + std::to_string(report.onednn_packed_linears) + " vision linears packed for oneDNN"
              : "")
      << (report.row_split_linears > 0 ? ", " + std::to_string(report.row_split_linears) + " vision linears split by rows" : "")
      << ") | vision " << d.vision_hidden << " x " << d.vision_layers_run << " layers | decoder " << d.hidden << " x " << d.layers
      << " layers, vocab " << d.vocab << "\n";
  if (!report.model.performance_note.empty()) out << "note: " << report.model.performance_note << "\n";
  out << (o.video.empty()
              ? "image " + o.image
              : "video " + o.video + " (" + std::to_string(report.rows.empty() ? 0 : report.rows.front().crops) + " frames)")
      << " | " << o.max_new_tokens << " new tokens (EOS ignored) | warm-up " << o.warmup << ", median of " << o.repeat
      << " [min-max] | open " << fmt("%.0f ms", report.open_ms) << ", weights " << fmt("%.0f MiB", mib(report.weight_bytes))
      << ", model resident " << fmt("%.0f MiB", mib(report.resident_after_open - report.resident_before_open))
      << fmt(" after open, %.0f MiB", mib(report.resident_after_runs - report.resident_before_open)) << " after the runs"
      << (report.huge_page_bytes > 0 ? fmt(" (decoder weights %.0f MiB moved to huge pages, ", mib(report.huge_page_bytes)) +
                                           fmt("%.0f MiB granted)", mib(report.resident_huge_pages))
                                     : std::string())
      << "\n\n";

  const ConfigResult* full = full_row(report);
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %6s %6s %9s %9s %21s %10s %21s %8s %8s %8s %7s\n", "method", "visual", "prompt",
                "vision ms", "reduce ms", "prefill ms", "decode/tok", "end-to-end ms", "prefill", "ideal", "ideal", "of");
  out << line;
  std::snprintf(line, sizeof line, "%-14s %6s %6s %9s %9s %21s %10s %21s %8s %8s %8s %7s\n", "", "tokens", "tokens", "", "",
                "median [min-max]", "ms", "median [min-max]", "speedup", "tokens", "FLOPs", "ideal");
  out << line;
  for (const auto& r : report.rows) {
    const auto& pf = r.ms.at("prefill");
    const auto& tt = r.ms.at("total");
    std::string sp = "-", it = "-", ifl = "-", of = "-";
    if (full) {
      const double speed = full->ms.at("prefill").median / pf.median;
      const double ideal_f = full->flops.prefill / r.flops.prefill;
      sp = fmt("%.2fx", speed);
      it = fmt("%.2fx", static_cast<double>(full->prompt_tokens) / static_cast<double>(r.prompt_tokens));
      ifl = fmt("%.2fx", ideal_f);
      of = fmt("%.0f%%", 100.0 * speed / ideal_f);
    }
    const std::string pre = fmt("%.1f", pf.median) + " [" + fmt("%.1f", pf.min) + "-" + fmt("%.1f", pf.max) + "]";
    const std::string tot = fmt("%.1f", tt.median) + " [" + fmt("%.1f", tt.min) + "-" + fmt("%.1f", tt.max) + "]";
    std::snprintf(line, sizeof line, "%-14s %6lld %6lld %9.1f %9.2f %21s %10.2f %21s %8s %8s %8s %7s\n", r.label().c_str(),
                  static_cast<long long>(r.visual_tokens), static_cast<long long>(r.prompt_tokens), r.ms.at("vision").median,
                  r.ms.at("reduce").median, pre.c_str(), r.ms.at("decode_per_token").median, tot.c_str(), sp.c_str(), it.c_str(),
                  ifl.c_str(), of.c_str());
    out << line;
  }

  out << "\n";
  std::snprintf(line, sizeof line, "%-14s %10s %10s %10s %12s %10s %10s %11s %11s %10s\n", "method", "GFLOP", "GFLOP", "GFLOP",
                "GFLOP", "reduce %", "KV cache", "KV alloc", "peak", "e2e");
  out << line;
  std::snprintf(line, sizeof line, "%-14s %10s %10s %10s %12s %10s %10s %11s %11s %10s\n", "", "vision", "projector", "prefill",
                "decode/tok", "of full pf", "MiB", "MiB", "+MiB", "speedup");
  out << line;
  for (const auto& r : report.rows) {
    std::string pct = "-", e2e = "-";
    if (full) {
      pct = fmt("%.2f%%", 100.0 * r.ms.at("reduce").median / full->ms.at("prefill").median);
      e2e = fmt("%.2fx", full->ms.at("total").median / r.ms.at("total").median);
    }
    std::snprintf(line, sizeof line, "%-14s %10.2f %10.2f %10.2f %12.3f %10s %10.2f %11.2f %11.1f %10s\n", r.label().c_str(),
                  r.flops.vision / 1e9, r.flops.projector / 1e9, r.flops.prefill / 1e9, r.flops.decode_per_token / 1e9,
                  pct.c_str(), mib(r.kv_cache_bytes), mib(r.kv_cache_allocated_bytes), mib(r.peak_over_baseline_bytes),
                  e2e.c_str());
    out << line;
  }
  out << "peak +MiB: " << report.memory_kind << " above the level before the timed runs"
      << (report.peak_per_configuration ? " (peak reset per configuration)"
                                        : " (WARNING: the peak could not be reset: lifetime peak)")
      << "\n";

  if (python.is_object()) {
    out << "\nPython reference (eager PyTorch " << python.value("torch", "?") << ", " << python.value("threads", 0)
        << " threads, same bundle weights, same prompt ids, pixels and visual-token counts):\n";
    std::snprintf(line, sizeof line, "%-14s %12s %12s %12s %14s %14s\n", "method", "py vision ms", "py prefill ms",
                  "py decode/tok", "C++/Py prefill", "C++/Py decode");
    out << line;
    for (const auto& r : report.rows) {
      const auto* p = python_row(python, r.label());
      if (!p) continue;
      if (!comparable_with_python(r)) {
        std::snprintf(line, sizeof line, "%-14s %12s %12s %12s %14s %14s\n", r.label().c_str(), "-", "-", "-", "n/a", "n/a");
        out << line;
        continue;
      }
      const double pv = py_median(*p, "vision_ms"), pp = py_median(*p, "prefill_ms"), pd = py_median(*p, "decode_ms_per_token");
      std::snprintf(line, sizeof line, "%-14s %12.1f %12.1f %12.2f %14.2f %14.2f\n", r.label().c_str(), pv, pp, pd,
                    pp > 0 ? r.ms.at("prefill").median / pp : 0.0, pd > 0 ? r.ms.at("decode_per_token").median / pd : 0.0);
      out << line;
    }
    out << "(ratio < 1: C++ faster; n/a: " << kNotComparable << ")\n";
  }
  if (!report.vs_machine_dtype.empty()) {
    out << "\nagainst this machine's GEMM rate (" << report.vs_machine_dtype << " torch::linear " << GemmProbe::kM << "x"
        << GemmProbe::kK << "x" << GemmProbe::kN
        << (report.vs_machine_packed ? ", the faster of the plain and the oneDNN-packed weight" : "") << ", timed for "
        << fmt("%g", o.vs_machine_seconds)
        << " s before each timed request, and the memory read (sum of 1 GiB in huge pages) for as long; per request: the stage's "
           "FLOP rate"
        << " over that GEMM rate, and decode's weight bytes per second (" << fmt("%.3g", report.decode_weight_bytes / 1e9)
        << " GB a step) over that read rate; median [min-max])\n";
    std::snprintf(line, sizeof line, "%-14s %24s %21s %21s %21s %21s\n", "method", "GEMM GFLOP/s", "vision + projector",
                  "prefill", "read GB/s", "decode");
    out << line;
    const auto range = [](const Spread& s, const char* f, double scale) {
      return fmt(f, s.median * scale) + " [" + fmt(f, s.min * scale) + "-" + fmt(f, s.max * scale) + "]";
    };
    for (const auto& r : report.rows) {
      const auto decode = r.vs_machine.find("decode_share");
      std::snprintf(line, sizeof line, "%-14s %24s %21s %21s %21s %21s\n", r.label().c_str(),
                    range(r.vs_machine.at("gemm_gflops"), "%.0f", 1).c_str(),
                    (range(r.vs_machine.at("vision_share"), "%.0f", 100) + " %").c_str(),
                    (range(r.vs_machine.at("prefill_share"), "%.0f", 100) + " %").c_str(),
                    range(r.vs_machine.at("read_gbs"), "%.1f", 1).c_str(),
                    decode == r.vs_machine.end() ? "- (one token)" : (range(decode->second, "%.0f", 100) + " %").c_str());
      out << line;
    }
  }
  for (const auto& r : report.rows) {
    if (r.profile.ops.empty()) continue;
    out << "\n"
        << r.label() << ": one profiled request, operators by self time (LibTorch profiler, calling thread)\n"
        << format_op_profile(r.profile, o.profile_ops);
  }
  return out.str();
}

void dump_inputs(const BenchReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::kInvalidArgument, dir + ": cannot create the folder (" + ec.message() + ")");
  write_npy(dir + "/pixel_values.npy", report.pixel_values.to(torch::kFloat).contiguous());
  nlohmann::json j;
  j["token_ids"] = report.input.token_ids;
  j["image_token_id"] = report.input.image_token_id;
  j["crops_per_image"] = report.input.crops_per_image;
  j["max_new_tokens"] = report.options.max_new_tokens;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : report.rows) {
    nlohmann::json images = nlohmann::json::array();
    for (const auto& red : r.reductions) {
      images.push_back({{"original_tokens", red.original_tokens}, {"kept", red.kept}, {"bias", red.bias}});
    }
    rows.push_back({{"label", r.label()},
                    {"method", r.method},
                    {"budget", r.budget},
                    {"visual_tokens", r.visual_tokens},
                    {"prompt_tokens", r.prompt_tokens},
                    {"images", images}});
  }
  j["rows"] = rows;
  std::ofstream f(dir + "/inputs.json");
  if (!f) throw Error(ErrorCode::kInvalidArgument, dir + "/inputs.json: cannot write");
  f << j.dump(1) << "\n";
}

}  // namespace era::bench
