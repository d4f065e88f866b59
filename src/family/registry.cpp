// The model families this build serves, by manifest `arch`. A new family adds one line here.
#include <functional>
#include <mutex>
#include <utility>

#include "era/error.h"
#include "family/llava15/llava15_family.h"
#include "family/llava_next/llava_next_family.h"
#include "family/llava_onevision/llava_onevision_family.h"
#include "family/llava_sections.h"
#include "family/model_family.h"
#include "family/qwen2_5_vl/qwen2_5_vl_family.h"
#include "family/qwen2_5_vl/qwen_sections.h"
#include "family/vision_cost.h"

namespace era {
namespace {

struct Entry {
  std::string arch;
  FamilyFactory make;
  ModuleChecks check_modules;                       // the family's vision tower and projector against the manifest
  std::function<VisionCost(const Manifest&)> cost;  // era_bench's FLOPs of the tower and projector
  SectionChecks check_sections;                     // the family's own manifest sections
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
       llava_vision_cost, llava_sections},
      {"llava-next", [](const ModelBundle& b) { return std::make_unique<LlavaNextFamily>(b); }, check_llava_modules,
       llava_vision_cost, llava_sections},
      {"llava-onevision", [](const ModelBundle& b) { return std::make_unique<LlavaOnevisionFamily>(b); }, check_llava_modules,
       llava_vision_cost, llava_sections},
      {"qwen2.5-vl", [](const ModelBundle& b) { return std::make_unique<Qwen25VlFamily>(b); }, check_qwen25vl_modules,
       qwen25vl_vision_cost, qwen25vl_sections},
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
