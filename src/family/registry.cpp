// The model families this build serves, by manifest `arch`. A new family adds one line here.
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "era/error.h"
#include "family/llava15/llava15_family.h"
#include "family/llava_hf_config.h"
#include "family/llava_native_vision.h"
#include "family/llava_next/llava_next_family.h"
#include "family/llava_onevision/llava_onevision_family.h"
#include "family/llava_sections.h"
#include "family/model_family.h"
#include "family/qwen2_5_vl/qwen2_5_vl_family.h"
#include "family/qwen2_5_vl/qwen_native_vision.h"
#include "family/qwen2_5_vl/qwen_sections.h"
#include "family/vision_cost.h"
#include "model/hf_folder.h"

namespace era {
namespace {

struct Entry {
  std::string arch;
  FamilyFactory make;
  ModuleChecks check_modules;                       // the family's vision tower and projector against the manifest
  std::function<VisionCost(const Manifest&)> cost;  // era_bench's FLOPs of the tower and projector
  SectionChecks check_sections;                     // the family's own manifest sections
  NativeVisionLoader native_vision = {};            // its tower and projector as era's own models, if it has them
  std::string hf_model_type = {};                   // config.json's model_type of its Hugging Face folders
  // The manifest of such a folder (family/<name>/..._hf_config.h); empty: read as exported bundles only.
  std::function<nlohmann::json(const std::string&, const nlohmann::json&)> hf_manifest = {};
};

void llava_sections(const Manifest& m) { read_llava_sections(m); }
void qwen25vl_sections(const Manifest& m) { read_qwen25vl_sections(m); }

// The table, and the lock that guards additions (register_model_family) against lookups.
std::mutex& table_lock() {
  static std::mutex lock;
  return lock;
}

std::vector<Entry>& families() {
  static std::vector<Entry> table = {
      {"llava-1.5", [](const ModelBundle& b) { return std::make_unique<Llava15Family>(b); }, check_llava_modules,
       llava_vision_cost, llava_sections, load_llava_native_vision, "llava",
       [](const std::string& dir, const nlohmann::json& c) { return llava_manifest_from_hf(dir, c, "llava-1.5"); }},
      {"llava-next", [](const ModelBundle& b) { return std::make_unique<LlavaNextFamily>(b); }, check_llava_modules,
       llava_vision_cost, llava_sections, load_llava_native_vision, "llava_next",
       [](const std::string& dir, const nlohmann::json& c) { return llava_manifest_from_hf(dir, c, "llava-next"); }},
      {"llava-onevision", [](const ModelBundle& b) { return std::make_unique<LlavaOnevisionFamily>(b); }, check_llava_modules,
       llava_vision_cost, llava_sections, load_llava_native_vision, "llava_onevision"},
      {"qwen2.5-vl", [](const ModelBundle& b) { return std::make_unique<Qwen25VlFamily>(b); }, check_qwen25vl_modules,
       qwen25vl_vision_cost, qwen25vl_sections, load_qwen25vl_native_vision, "qwen2_5_vl"},
  };
  return table;
}

// `where` names the manifest in the error for an arch this build does not serve. (A copy: the
// table may grow while the caller uses it; lookups happen at load and in era_bench only.)
Entry entry_of(const std::string& arch, const std::string& where) {
  {
    const std::lock_guard<std::mutex> hold(table_lock());
    for (const Entry& e : families()) {
      if (e.arch == arch) return e;
    }
  }
  std::string known;
  for (const auto& a : known_architectures()) known += (known.empty() ? "" : ", ") + a;
  throw Error(ErrorCode::kBundle, where + ": architecture '" + arch + "' is not supported by this build (" + known + ")");
}

Entry entry_of(const ModelBundle& bundle) { return entry_of(bundle.manifest.arch, bundle.dir + "/manifest.json"); }

}  // namespace

std::vector<std::string> known_architectures() {
  const std::lock_guard<std::mutex> hold(table_lock());
  std::vector<std::string> names;
  for (const Entry& e : families()) names.push_back(e.arch);
  return names;
}

std::unique_ptr<ModelFamily> make_model_family(const ModelBundle& bundle) { return entry_of(bundle).make(bundle); }

void check_family_modules(const ModelBundle& bundle) {
  const Entry entry = entry_of(bundle);
  if (entry.check_modules) entry.check_modules(bundle);
}

void check_family_sections(const Manifest& manifest) {
  const Entry entry = entry_of(manifest.arch, manifest.source);
  if (entry.check_sections) entry.check_sections(manifest);
}

std::shared_ptr<VisionBackend> load_family_native_vision(const std::string& hf_dir, const Manifest& manifest,
                                                         const torch::Device& device, torch::ScalarType dtype) {
  const Entry entry = entry_of(manifest.arch, manifest.source);
  return entry.native_vision ? entry.native_vision(hf_dir, manifest, device, dtype) : nullptr;
}

nlohmann::json manifest_from_hf_folder(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const nlohmann::json config = read_hf_config(dir);
  const nlohmann::json type = config.value("model_type", nlohmann::json());
  std::vector<Entry> table;
  {
    const std::lock_guard<std::mutex> hold(table_lock());
    table = families();
  }
  std::string known;
  for (const Entry& e : table) {
    if (e.hf_model_type.empty()) continue;
    known += (known.empty() ? "" : ", ") + e.hf_model_type;
    if (type != nlohmann::json(e.hf_model_type)) continue;
    if (!e.hf_manifest)
      throw Error(ErrorCode::kBundle, path + ": model_type = \"" + e.hf_model_type + "\": era reads " + e.arch +
                                          " from an exported bundle only, so far (tools/export_llava.py --checkpoint " + dir +
                                          " --out BUNDLE)");
    return e.hf_manifest(dir, config);
  }
  // haotian-liu/LLaVA's own checkpoints (liuhaotian/llava-v1.5-7b): transformers' conversion first
  for (const char* original : {"llava_llama", "llava_mistral", "llava_mpt", "llava_qwen"})
    if (type == nlohmann::json(original))
      throw Error(ErrorCode::kBundle, path + ": model_type = \"" + std::string(original) +
                                          "\": an original LLaVA repository checkpoint; convert it to the llava-hf layout "
                                          "first (transformers' convert_llava_weights_to_hf.py), or use the llava-hf release");
  throw Error(ErrorCode::kBundle, path + ": model_type = " + (type.is_null() ? std::string("(none)") : type.dump()) +
                                      ": not a model era runs (" + known + ")");
}

VisionCost vision_cost(const Manifest& manifest) {
  const Entry entry = entry_of(manifest.arch, "manifest of " + manifest.model_name);
  if (!entry.cost) throw Error(ErrorCode::kBundle, "architecture '" + manifest.arch + "' has no FLOP formulas in this build");
  return entry.cost(manifest);
}

void register_model_family(const std::string& arch, FamilyFactory make, ModuleChecks check_modules,
                           std::function<VisionCost(const Manifest&)> cost, SectionChecks check_sections) {
  if (arch.empty() || !make) throw Error(ErrorCode::kInvalidArgument, "register_model_family: needs an arch and a factory");
  const std::lock_guard<std::mutex> hold(table_lock());
  for (const Entry& e : families()) {
    if (e.arch == arch) throw Error(ErrorCode::kInvalidArgument, "register_model_family: arch '" + arch + "' is taken");
  }
  families().push_back({arch, std::move(make), std::move(check_modules), std::move(cost), std::move(check_sections)});
}

}  // namespace era
