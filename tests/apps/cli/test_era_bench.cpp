// era_bench end to end on the tiny bundle: the JSON report has every column with consistent
// values (budgets honoured, KV cache sized by the prompt, FLOPs ordered, spreads ordered), and
// an unknown method is one error line with exit status 2. No timing is asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench/flops.h"
#include "kernels/cpu_gemv.h"
#include "kernels/onednn_linear.h"
#include "model/cpu_matmul.h"
#include "model/int8_test_util.h"
#include "model/manifest.h"
#include "test_support.h"
#include "util/cpu_threads.h"

namespace era {
namespace {

test::CommandResult bench(const std::string& args) {
  return test::run_command(test::era_bench_path() + " -m " + test::bundle_dir() + " --image " + test::source_dir() +
                           "/tests/data/sample.png " + args);
}

const nlohmann::json& row_of(const nlohmann::json& report, const std::string& label) {
  for (const auto& r : report["rows"]) {
    if (r["label"] == label) return r;
  }
  throw std::runtime_error("no row " + label);
}

TEST(EraBenchCli, JsonReportHasEveryColumnWithConsistentValues) {
  const auto dir = test::scratch_dir("era_bench_json");
  const auto r = bench("--methods full,era --tokens 8,32 --warmup 0 --repeat 2 -n 3 --json " + dir + "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("prefill"), std::string::npos);  // the table went to stdout
  const auto j = nlohmann::json::parse(test::read_file(dir + "/out.json"));
  ASSERT_EQ(j["rows"].size(), 3u);
  const Manifest m = read_manifest(test::bundle_dir());

  // era's decode kernel: every CPU beside a pthread OpenBLAS (LibTorch then has one), else LibTorch's count
  const bool env = std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS");
  EXPECT_EQ(j["kernel_threads"].get<int>(), blas_runs_own_threads() && !env ? usable_cpu_count() : j["threads"].get<int>());

  const auto& full = row_of(j, "full");
  EXPECT_EQ(full["visual_tokens"], m.vision.num_patches);
  for (const char* label : {"era@8", "era@32"}) {
    const auto& era = row_of(j, label);
    EXPECT_EQ(era["visual_tokens"], era["budget"]) << label;
    EXPECT_EQ(era["text_tokens"], full["text_tokens"]);
    EXPECT_EQ(era["prompt_tokens"].get<int64_t>(), era["text_tokens"].get<int64_t>() + era["visual_tokens"].get<int64_t>());
    EXPECT_LT(era["flops"]["prefill"].get<double>(), full["flops"]["prefill"].get<double>());
    EXPECT_DOUBLE_EQ(era["flops"]["vision"].get<double>(), full["flops"]["vision"].get<double>());
    const double ideal = full["prompt_tokens"].get<double>() / era["prompt_tokens"].get<double>();
    EXPECT_DOUBLE_EQ(era["speedup"]["ideal_tokens"].get<double>(), ideal);
    EXPECT_GT(era["speedup"]["ideal_flops"].get<double>(), 1.0);
  }
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["generated_tokens"], 3);  // EOS ignored: every run decodes the same length
    EXPECT_EQ(row["crops"], 1);
    // 2 decode steps fed back after the prompt: prompt + 2 slots of K and V in every layer
    const int64_t slots = row["prompt_tokens"].get<int64_t>() + 2;
    EXPECT_EQ(row["kv_cache_bytes"].get<int64_t>(),
              2 * m.text.num_layers * m.text.num_kv_heads * m.text.cache_head_dim * 4 * slots);
    for (const char* stage : {"preprocess", "vision", "reduce", "prefill", "decode_per_token", "total"}) {
      const auto& s = row["ms"][stage];
      EXPECT_LE(s["min"].get<double>(), s["median"].get<double>()) << stage;
      EXPECT_LE(s["median"].get<double>(), s["max"].get<double>()) << stage;
      EXPECT_LE(s["q1"].get<double>(), s["q3"].get<double>()) << stage;
      EXPECT_GE(s["min"].get<double>(), 0.0) << stage;
    }
    EXPECT_GT(row["ms"]["total"]["median"].get<double>(), row["ms"]["prefill"]["median"].get<double>());
    EXPECT_GE(row["peak_bytes"].get<int64_t>(), row["peak_over_baseline_bytes"].get<int64_t>());
  }
  EXPECT_GT(j["memory"]["resident_after_open_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(j["model"]["layers"], m.text.num_layers);
}

// A video instead of an image (OneVision): rows count the frames as crops and the pooled tokens;
// an image and a video together are refused.
TEST(EraBenchCli, VideoRowsCountFramesAndPooledTokens) {
  const auto dir = test::scratch_dir("era_bench_video");
  std::filesystem::create_directories(dir + "/frames");
  for (int k = 0; k < 3; ++k) {
    std::filesystem::copy_file(test::source_dir() + "/tests/data/sample.png", dir + "/frames/f" + std::to_string(k) + ".png");
  }
  const std::string base = test::era_bench_path() + " -m " + test::onevision_bundle_dir() + " --video " + dir + "/frames";
  auto r = test::run_command(base + " --frames 2 --methods full,era --tokens 40 --warmup 0 --repeat 1 -n 2 --json " + dir +
                             "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(2 frames)"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/out.json"));
  EXPECT_EQ(j["frames"], 2);
  EXPECT_EQ(row_of(j, "full")["crops"], 2);
  EXPECT_EQ(row_of(j, "full")["visual_tokens"], 2 * 196 + 1);
  EXPECT_EQ(row_of(j, "era@40")["visual_tokens"], 40 + 1);  // 20 a frame, then the newline
  r = test::run_command(base + " --image " + test::source_dir() + "/tests/data/sample.png --warmup 0 --repeat 1 -n 1");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(EraBenchCli, InputsForThePythonReferenceAreDumped) {
  const auto dir = test::scratch_dir("era_bench_dump");
  const auto r = bench("--methods era --tokens 16 --warmup 0 --repeat 1 -n 1 --dump-inputs " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/inputs.json"));
  ASSERT_EQ(j["rows"].size(), 1u);
  const auto& images = j["rows"][0]["images"];
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0]["kept"].size(), 16u);
  EXPECT_EQ(images[0]["bias"].size(), 16u);
  const auto ids = j["token_ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(std::count(ids.begin(), ids.end(), j["image_token_id"].get<int64_t>()), 1);
  EXPECT_TRUE(std::filesystem::exists(dir + "/pixel_values.npy"));
}

// FastV / DART prefill every token up to layer K in C++, while the Python reference prefills only
// the kept ones: no C++/Python ratio for those rows (it used to compare 158 with 670 tokens).
TEST(EraBenchCli, InDecoderRowsAreNotComparedWithThePythonReference) {
  const auto dir = test::scratch_dir("era_bench_python");
  const auto r = bench(
      "--methods full,era,fastv --tokens 16 --method-set fastv_layer=1 --warmup 0 --repeat 1 -n 2 "
      "--python-reference " +
      test::source_dir() + "/tools/bench_python_reference.py --python " + ERA_PYTHON_PATH + " --json " + dir + "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/out.json"));
  EXPECT_TRUE(row_of(j, "era@16")["python"].contains("cpp_over_python")) << j.dump();
  const auto& fastv = row_of(j, "fastv@16")["python"];
  EXPECT_FALSE(fastv.contains("cpp_over_python")) << fastv.dump();
  EXPECT_NE(fastv.value("not_compared", "").find("in-decoder"), std::string::npos) << fastv.dump();
  EXPECT_NE(r.out.find("fastv@16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("n/a"), std::string::npos) << r.out;
}

TEST(EraBenchCli, UnknownMethodIsOneErrorLineAndExitTwo) {
  const auto r = bench("--methods full,no-such-method --tokens 8 --warmup 0 --repeat 1 -n 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("era_bench: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("no-such-method"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(EraBenchCli, BadBudgetIsRefused) {
  const auto r = bench("--methods era --tokens 0 --repeat 1 -n 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("budget"), std::string::npos) << r.err;
}

TEST(EraBenchCli, MachineLimitsPrintGemmPerDtypeAndBandwidth) {
  const auto r = test::run_command(test::era_bench_path() + " --machine --machine-seconds 1 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 threads"), std::string::npos) << r.out;
  std::vector<std::string> rows = {"GEMM float32",  "GEMM bfloat16", "GEMM bf16>f32", "GEMV float32", "GEMV bfloat16",
                                   "ATTN bf16-ops", "ATTN era-bf16", "memory read",   "memory copy"};
  // the product with its weight packed for oneDNN, where sessions pack (model/onednn_linear.h)
  const bool packs = cpu_packs_bf16_for_onednn();
  EXPECT_EQ(r.out.find("GEMM bf16-pack") != std::string::npos, packs) << r.out;
  if (packs) rows.push_back("GEMM bf16-pack");
  if (gemv_kernel_available()) {  // era's decode kernel (model/cpu_gemv.h), on bf16 and int8 weights
    rows.push_back("GEMV era-bf16");
    rows.push_back("GEMV era-int8");
    // the plainer loops the CPU also has
    if (gemv_best_loop() > GemvLoop::kAvx512) rows.push_back("GEMV era-avx512");
    if (gemv_best_loop() > GemvLoop::kAvx2) rows.push_back("GEMV era-avx2");
  }
  // the latency between the first two CPUs, where the process may run on two (bench/core_latency.h)
  if (std::thread::hardware_concurrency() >= 2) {
    const auto at = r.out.find("core to core");
    ASSERT_NE(at, std::string::npos) << r.out;
    const auto line = r.out.substr(at, r.out.find('\n', at) - at);
    const auto unit = line.find(" ns");
    ASSERT_NE(unit, std::string::npos) << line;
    EXPECT_GT(std::stod(line.substr(line.find_last_of(' ', unit - 1) + 1)), 0.0) << line;
  }
  for (const std::string& row : rows) {
    const auto at = r.out.find(row);
    ASSERT_NE(at, std::string::npos) << row << "\n" << r.out;
    const auto line = r.out.substr(at, r.out.find('\n', at) - at);
    const auto unit = line.find(line.find("GEMM") == 0 || line.find("GEMV") == 0 || line.find("ATTN") == 0 ? "GFLOP/s" : "GB/s");
    ASSERT_NE(unit, std::string::npos) << line;
    const auto number = line.find_last_of(' ', unit - 2);
    EXPECT_GT(std::stod(line.substr(number + 1, unit - number - 1)), 0.0) << line;
  }
}

TEST(EraBenchCli, ProfileOpsSplitsOperatorTimeByStage) {
  const auto dir = test::scratch_dir("era_bench_profile");
  const auto r = bench("--methods era --tokens 16 --warmup 0 --repeat 1 -n 3 --profile-ops 4 --json " + dir + "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/out.json"));
  const auto& profile = row_of(j, "era@16")["op_profile"];
  std::set<std::string> stages, op_stages;
  for (const auto& s : profile["stages"]) {
    stages.insert(s["stage"].get<std::string>());
    EXPECT_GT(s["ms"].get<double>(), 0.0) << s.dump();
  }
  for (const char* stage : {"preprocess", "vision", "reduce", "prefill", "decode"}) EXPECT_TRUE(stages.count(stage)) << stage;
  for (const auto& s : profile["stages"]) {
    if (s["stage"] == "decode") {
      EXPECT_EQ(s["calls"], 2) << s.dump();
    }  // 3 tokens: 2 steps fed back
  }
  bool matmul_in_prefill = false;
  for (const auto& op : profile["ops"]) {
    EXPECT_GE(op["self_ms"].get<double>(), 0.0);
    EXPECT_GT(op["calls"].get<int64_t>(), 0);
    if (op["stage"] == "prefill" && (op["op"] == "aten::addmm" || op["op"] == "aten::mm" || op["op"] == "aten::linear"))
      matmul_in_prefill = true;
  }
  EXPECT_TRUE(matmul_in_prefill) << profile.dump();
  EXPECT_NE(r.out.find("prefill"), std::string::npos);
}

// The bundle's own operators (era::gemv in a bf16 decode step, era::onednn_linear in a packed
// vision tower) are operators of the stage they run in, not stages of their own.
TEST(EraBenchCli, ProfileOpsCountsEraOperatorsInTheirStage) {
  const auto dir = test::scratch_dir("era_bench_profile_bf16");
  const auto r =
      bench("--dtype bfloat16 --methods era --tokens 16 --warmup 0 --repeat 1 -n 3 --profile-ops 4 --json " + dir + "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/out.json"));
  const auto& profile = row_of(j, "era@16")["op_profile"];
  std::set<std::string> stages;
  for (const auto& s : profile["stages"]) stages.insert(s["stage"].get<std::string>());
  EXPECT_EQ(stages, (std::set<std::string>{"preprocess", "vision", "reduce", "prefill", "decode"})) << profile.dump();
  std::set<std::string> era_ops_in_decode, era_ops_in_vision;
  for (const auto& op : profile["ops"]) {
    const auto name = op["op"].get<std::string>();
    if (name.rfind("era::", 0) != 0) continue;
    if (op["stage"] == "decode") era_ops_in_decode.insert(name);
    if (op["stage"] == "vision") era_ops_in_vision.insert(name);
  }
  // the bf16 decode step runs era's kernel where this CPU has it (model/cpu_matmul.h)
  if (gemv_kernel_available()) {
    EXPECT_TRUE(era_ops_in_decode.count("era::gemv")) << profile.dump();
  }
  // the vision tower's linears go through era::onednn_linear where the runtime packs them for
  // oneDNN or, on a LibTorch that cannot pack, splits their rows (model/onednn_linear.h)
  const bool packs = j["cpu_matmul"]["onednn_packed_linears"].get<int>() > 0;
  const bool splits = j["cpu_matmul"]["row_split_linears"].get<int>() > 0;
  EXPECT_EQ(era_ops_in_vision.count("era::onednn_linear") > 0, packs || splits) << profile.dump();
  EXPECT_EQ(packs, cpu_packs_bf16_for_onednn());
  EXPECT_EQ(splits, cpu_splits_bf16_linears_by_rows());
}

// --vs-machine: the GEMM rate timed before each timed request, in the dtype the big products run
// in, and each request's vision and prefill FLOP rates as shares of it (JSON per row, and a table).
TEST(EraBenchCli, VsMachineGivesTheStagesShareOfTheGemmRate) {
  const auto dir = test::scratch_dir("era_bench_vs_machine");
  const auto r = bench("--methods full,era --tokens 16 --warmup 0 --repeat 2 -n 2 --vs-machine 0.05 --json " + dir + "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("against this machine's GEMM rate (float32 torch::linear 512x4096x4096"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(test::read_file(dir + "/out.json"));
  for (const char* label : {"full", "era@16"}) {
    const auto& vm = row_of(j, label)["vs_machine"];
    EXPECT_EQ(vm["gemm_dtype"], "float32") << vm.dump();  // the fixture bundle is float32
    for (const char* key : {"gemm_gflops", "vision_share", "prefill_share", "read_gbs", "decode_share"}) {
      const auto& s = vm[key];
      EXPECT_GT(s["min"].get<double>(), 0.0) << key << " " << vm.dump();
      EXPECT_LE(s["min"].get<double>(), s["median"].get<double>()) << key;
      EXPECT_LE(s["median"].get<double>(), s["max"].get<double>()) << key;
    }
  }
  // bf16 products in bf16 (native) are measured against the bf16 GEMM, widened ones against float32
  for (const std::string mode : {"native", "float32"}) {
    const auto b = bench("--dtype bfloat16 --cpu-matmul " + mode +
                         " --methods era --tokens 16 --warmup 0 --repeat 1 -n 2 --vs-machine 0.05 --json -");
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const auto out = nlohmann::json::parse(b.out);
    const auto& row = row_of(out, "era@16");
    const auto& vm = row["vs_machine"];
    EXPECT_EQ(vm["gemm_dtype"], mode == "native" ? "bfloat16" : "float32");
    // decode: the step's weight bytes (every decoder matrix but the embeddings, 2 bytes each in
    // bf16) per second over the read rate timed before the one request
    const double weights = bench::decode_step_weights(bench::read_model_dims(test::bundle_dir()));
    EXPECT_DOUBLE_EQ(vm["decode_weight_bytes"].get<double>(), 2 * weights);
    const double step_s = row["ms"]["decode_per_token"]["median"].get<double>() / 1e3;
    EXPECT_NEAR(vm["decode_share"]["median"].get<double>(), 2 * weights / step_s / (vm["read_gbs"]["median"].get<double>() * 1e9),
                1e-6)
        << row.dump();
    // a bf16 GEMM also with its weight packed for oneDNN where sessions pack (model/onednn_linear.h)
    const bool packs = mode == "native" && cpu_packs_bf16_for_onednn();
    EXPECT_EQ(vm["gemm_packed_too"], packs) << vm.dump();
  }
  const auto gpu = bench("--device cuda --methods era --tokens 16 --vs-machine 1");  // refused before loading
  EXPECT_EQ(gpu.exit_code, 2) << gpu.err;
  EXPECT_NE(gpu.err.find("--vs-machine times the CPU's GEMM, but the model runs on cuda"), std::string::npos) << gpu.err;
  const auto plain = bench("--methods era --tokens 16 --warmup 0 --repeat 1 -n 2 --json -");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(row_of(nlohmann::json::parse(plain.out), "era@16").contains("vs_machine"));
}

TEST(EraBenchCli, ReportsWhereBfloat16MatmulsRunInFloat32) {
  for (const std::string mode : {"float32", "native"}) {
    const auto r =
        bench("--dtype bfloat16 --cpu-matmul " + mode + " --methods era --tokens 16 --warmup 0 --repeat 1 -n 2 --json -");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["cpu_matmul"]["mode"], mode);
    if (mode == "float32") {
      EXPECT_GE(j["cpu_matmul"]["float32_from_rows"].get<int64_t>(), 1);
    } else {
      EXPECT_EQ(j["cpu_matmul"]["float32_from_rows"], 0);
    }
  }
  const auto bad = bench("--cpu-matmul fast --methods era --tokens 16 --repeat 1 -n 1");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--cpu-matmul"), std::string::npos) << bad.err;
}

TEST(EraBenchCli, ReportsWhetherTorchScriptOptimisesTheGraphs) {
  for (const std::string mode : {"auto", "on", "off"}) {
    const auto r = bench("--jit-optimize " + mode + " --methods era --tokens 16 --warmup 0 --repeat 1 -n 2 --json -");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["jit_optimize"]["mode"], mode);
    EXPECT_EQ(j["jit_optimize"]["optimize_graphs"], mode == "on") << mode;  // auto: off on the CPU
  }
  const auto bad = bench("--jit-optimize sometimes --methods era --tokens 16 --repeat 1 -n 1");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--jit-optimize"), std::string::npos) << bad.err;
}

TEST(EraBenchCli, ReportsTheInt8EngineAndTheWeightCopiesItFreed) {
  for (const std::string& int8_bundle : {test::int8_bundle_dir(), test::int8_dynamic_bundle_dir()}) {
    SCOPED_TRACE(int8_bundle);
    const auto r = test::run_command(
        test::era_bench_path() + " -m " + int8_bundle + " --image " + test::source_dir() +
        "/tests/data/sample.png --methods era --tokens 16 --warmup 0 --repeat 1 -n 2 --vs-machine 0.05 --json -");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.contains("int8")) << r.out;
    // a decode step streams one byte per int8 weight (--vs-machine's decode share)
    EXPECT_DOUBLE_EQ(row_of(j, "era@16")["vs_machine"]["decode_weight_bytes"].get<double>(),
                     bench::decode_step_weights(bench::read_model_dims(int8_bundle)));
    const std::string engine = j["int8"]["engine"], scheme = j["int8"]["scheme"];
    const int64_t freed = j["int8"]["freed_weight_copies_bytes"];
    EXPECT_EQ(scheme, read_manifest(int8_bundle).int8_scheme);
    // weight-only: era's kernel, nothing packed. Dynamic: oneDNN (Debian's 1.13) keeps a copy of
    // each int8 weight, one byte per weight, and era frees it; x86 / fbgemm (PyPI's) keep none
    if (scheme == "weight-only") {
      EXPECT_EQ(engine, "era");
    }
    EXPECT_EQ(freed, engine == "ONEDNN" ? test::decoder_int8_weight_bytes(read_manifest(int8_bundle)) : 0) << engine;
    EXPECT_GE(j["memory"]["peak_during_open_bytes"].get<int64_t>(), j["memory"]["resident_after_open_bytes"].get<int64_t>());
  }
  // a float bundle has no int8 section
  const auto plain = nlohmann::json::parse(bench("--methods era --tokens 16 --warmup 0 --repeat 1 -n 2 --json -").out);
  EXPECT_FALSE(plain.contains("int8"));
}

}  // namespace
}  // namespace era
