// The model families this build serves, by manifest `arch`. A new family adds one line here.
#include <functional>
#include <utility>

#include "era/error.h"
#include "family/llava15/llava15_family.h"
#include "family/llava_next/llava_next_family.h"
#include "family/llava_onevision/llava_onevision_family.h"
#include "family/model_family.h"
#include "family/qwen2_5_vl/qwen2_5_vl_family.h"

namespace era {
namespace {

using Factory = std::function<std::unique_ptr<ModelFamily>(const ModelBundle&)>;

const std::vector<std::pair<std::string, Factory>>& families() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"llava-1.5", [](const ModelBundle& b) { return std::make_unique<Llava15Family>(b); }},
      {"llava-next", [](const ModelBundle& b) { return std::make_unique<LlavaNextFamily>(b); }},
      {"llava-onevision", [](const ModelBundle& b) { return std::make_unique<LlavaOnevisionFamily>(b); }},
      {"qwen2.5-vl", [](const ModelBundle& b) { return std::make_unique<Qwen25VlFamily>(b); }},
  };
  return table;
}

}  // namespace

std::vector<std::string> known_architectures() {
  std::vector<std::string> names;
  for (const auto& [arch, make] : families()) names.push_back(arch);
  return names;
}

std::unique_ptr<ModelFamily> make_model_family(const ModelBundle& bundle) {
  for (const auto& [arch, make] : families()) {
    if (arch == bundle.manifest.arch) return make(bundle);
  }
  std::string known;
  for (const auto& a : known_architectures()) known += (known.empty() ? "" : ", ") + a;
  throw Error(ErrorCode::kBundle, bundle.dir + "/manifest.json: architecture '" + bundle.manifest.arch +
                                      "' is not supported by this build (" + known + ")");
}

}  // namespace era
