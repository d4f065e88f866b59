#pragma once
// Internal header. Checks of a bundle's TorchScript modules against its manifest: the shapes of
// their parameters (ShapeChecker) and the values the exporter baked into them as attributes
// (AttributeChecker). load_bundle runs the decoder's and the tokenizer's; each family checks its
// own vision tower and projector (family/<name>/, through load_bundle's `family_checks`).
#include <torch/script.h>

#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "era/error.h"

namespace era {

inline std::string shape_str(at::IntArrayRef shape) {
  std::ostringstream os;
  os << shape;
  return os.str();
}

// Checks the shape of one named parameter of a module against what the manifest implies (-1 in
// an expected shape: any size in that dimension).
class ShapeChecker {
 public:
  ShapeChecker(const torch::jit::Module& m, std::string dir, std::string file) : dir_(std::move(dir)), file_(std::move(file)) {
    for (const auto& p : m.named_parameters(/*recurse=*/true)) params_.emplace(p.name, p.value.sizes().vec());
    // weight-only int8 linears (model/int8_linear.h) hold their int8 weight as a buffer
    for (const auto& b : m.named_buffers(/*recurse=*/true)) {
      const std::string suffix = ".weight";
      const bool weight =
          b.name.size() > suffix.size() && b.name.compare(b.name.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (weight && b.value.scalar_type() == torch::kChar) params_.emplace(b.name, b.value.sizes().vec());
    }
    // int8 linears (tools/era_tools/int8_weights.py) hold their weight packed, not as a
    // parameter: their declared [out_features, in_features] stands in for it
    for (const auto& sub : m.named_modules()) {
      if (!sub.value.hasattr("_packed") || !sub.value.hasattr("out_features") || !sub.value.hasattr("in_features")) continue;
      params_.emplace(sub.name + ".weight",
                      std::vector<int64_t>{sub.value.attr("out_features").toInt(), sub.value.attr("in_features").toInt()});
    }
  }
  bool has(const std::string& name) const { return params_.count(name) > 0; }
  void expect(const std::string& name, std::vector<int64_t> shape) const {
    const auto it = params_.find(name);
    if (it == params_.end()) {
      throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": " + file_ + " has no parameter '" + name + "' (not an era export?)");
    }
    bool same = it->second.size() == shape.size();
    for (size_t d = 0; same && d < shape.size(); ++d) same = shape[d] < 0 || it->second[d] == shape[d];
    if (!same) {
      throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": " + file_ + " parameter '" + name + "' has shape " +
                                          shape_str(it->second) + " but the manifest implies " + shape_str(shape) +
                                          " (module from another model?)");
    }
  }

 private:
  std::map<std::string, std::vector<int64_t>> params_;  // name -> shape
  std::string dir_, file_;
};

inline std::string shown(int64_t v) { return std::to_string(v); }
inline std::string shown(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
inline std::string shown(const std::vector<int64_t>& v) {
  std::string text = "[";
  for (size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + std::to_string(v[i]);
  return text + "]";
}

// Checks the manifest against the values the exporter's modules keep as attributes:
// torch.jit.script keeps a module's Python ints, floats and lists (tools/era_tools/llava_model.py:
// each attention's num_heads / num_kv_heads / head_dim, the decoder's rope_theta, ...). The weight
// shapes fix only products such as num_heads x head_dim: a manifest that keeps the product but not
// the split would load, then fail inside TorchScript in every request. A module or attribute that
// is not there (modules from another exporter) is not checked.
class AttributeChecker {
 public:
  AttributeChecker(const torch::jit::Module& m, std::string dir, std::string file)
      : dir_(std::move(dir)), file_(std::move(file)) {
    for (const auto& sub : m.named_modules()) modules_.emplace(sub.name, sub.value);
  }
  // manifest `field` = `expected` must be the attribute `name` of the submodule `module` ("" = the
  // module itself).
  void expect(const std::string& module, const std::string& name, const std::string& field, int64_t expected) const {
    const auto value = attribute(module, name);
    if (value && value->isInt() && value->toInt() != expected) fail(module, name, field, shown(expected), shown(value->toInt()));
  }
  void expect(const std::string& module, const std::string& name, const std::string& field, double expected) const {
    const auto value = attribute(module, name);
    // both are the exporter's one Python float, written as its shortest round-trip text: equal
    // unless they were edited apart (the tolerance only absorbs a differently printed manifest)
    if (value && value->isDouble() && std::fabs(value->toDouble() - expected) > 1e-9 * std::fabs(expected))
      fail(module, name, field, shown(expected), shown(value->toDouble()));
  }
  void expect(const std::string& module, const std::string& name, const std::string& field,
              const std::vector<int64_t>& expected) const {
    const auto value = attribute(module, name);
    if (value && value->isIntList() && value->toIntVector() != expected)
      fail(module, name, field, shown(expected), shown(value->toIntVector()));
  }
  // A list of booleans attribute against the indexes where it must be true (Qwen2.5-VL's
  // full-attention blocks).
  void expect_true_at(const std::string& module, const std::string& name, const std::string& field,
                      const std::vector<int64_t>& expected) const {
    const auto value = attribute(module, name);
    if (!value || !value->isBoolList()) return;
    std::vector<int64_t> at;
    const auto flags = value->toBoolList();
    for (size_t i = 0; i < flags.size(); ++i)
      if (flags.get(i)) at.push_back(static_cast<int64_t>(i));
    if (at != expected) fail(module, name + " (true at)", field, shown(expected), shown(at));
  }

 private:
  std::optional<c10::IValue> attribute(const std::string& module, const std::string& name) const {
    const auto it = modules_.find(module);
    if (it == modules_.end() || !it->second.hasattr(name)) return std::nullopt;
    return it->second.attr(name);
  }
  [[noreturn]] void fail(const std::string& module, const std::string& name, const std::string& field,
                         const std::string& manifest, const std::string& actual) const {
    throw Error(ErrorCode::kBundle, "bundle " + dir_ + ": manifest.json: " + field + " = " + manifest + " but " + file_ + "'s " +
                                        (module.empty() ? "" : module + ".") + name + " is " + actual +
                                        " (the value the module was exported with)");
  }

  std::map<std::string, torch::jit::Module> modules_;  // submodule name -> module
  std::string dir_, file_;
};

}  // namespace era
