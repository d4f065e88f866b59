#pragma once
// Runs tools/bench_python_reference.py (the eager PyTorch modules the exporter scripts, with the
// bundle's own weights) on the inputs era_bench dumped, and reads its timings back.
#include <nlohmann/json.hpp>
#include <string>

#include "apps/bench/benchmark.h"

namespace era::bench {

struct PythonReferenceOptions {
  std::string script;                       // tools/bench_python_reference.py
  std::string python = "/usr/bin/python3";  // an interpreter with torch
  std::string work_dir;                     // where the inputs and the result go
};

// Dumps the inputs (dump_inputs), runs the script with the report's warm-up / repeat / threads /
// dtype, and returns its JSON ({"torch", "threads", "rows": [{"label", "vision_ms", "prefill_ms",
// "decode_ms_per_token"}...]}). Throws era::Error(kRuntime) naming the command if it fails.
nlohmann::json run_python_reference(const BenchReport& report, const PythonReferenceOptions& options);

}  // namespace era::bench
