#include "apps/bench/python_reference.h"

#include <cstdlib>
#include <fstream>

namespace era::bench {
namespace {

// Single-quoted for /bin/sh.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

nlohmann::json run_python_reference(const BenchReport& report, const PythonReferenceOptions& options) {
  dump_inputs(report, options.work_dir);
  const std::string result = options.work_dir + "/python_reference.json";
  const auto& o = report.options;
  std::string cmd = quoted(options.python) + " " + quoted(options.script) + " --bundle " + quoted(o.bundle_dir) + " --inputs " +
                    quoted(options.work_dir) + " --warmup " + std::to_string(o.warmup) + " --repeat " + std::to_string(o.repeat) +
                    " --threads " + std::to_string(report.threads) + " --out " + quoted(result);
  if (!o.session.dtype.empty()) cmd += " --dtype " + quoted(o.session.dtype);
  if (o.session.device != "cpu") cmd += " --device " + quoted(o.session.device);
  cmd += " 1>&2";  // its progress goes to stderr; era_bench's stdout stays the table / JSON
  const int status = std::system(cmd.c_str());
  if (status != 0)
    throw Error(ErrorCode::kRuntime, "the Python reference failed (exit status " + std::to_string(status) + "): " + cmd);
  std::ifstream in(result);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("rows")) throw Error(ErrorCode::kRuntime, result + ": not the Python reference's result");
  return j;
}

}  // namespace era::bench
