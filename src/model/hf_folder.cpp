#include "model/hf_folder.h"

#include <filesystem>

#include "era/error.h"
#include "kernels/huge_pages.h"
#include "util/input_file.h"

namespace era {

bool is_hf_folder(const std::string& dir) {
  std::error_code ec;
  return !std::filesystem::exists(dir + "/manifest.json", ec) && std::filesystem::is_regular_file(dir + "/config.json", ec);
}

nlohmann::json read_hf_config(const std::string& hf_dir) {
  const std::string path = hf_dir + "/config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nlohmann::json::object();
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_input_file(path, "model config", 16 << 20, ErrorCode::kBundle));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBundle, path + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw Error(ErrorCode::kBundle, path + ": not a JSON object");
  return config;
}

torch::Tensor HfWeightReader::read(const std::string& name, const std::vector<int64_t>& shape) const {
  const torch::Tensor t = folder_.tensor(name, shape);
  if (!t.is_floating_point())
    throw Error(ErrorCode::kBundle, folder_.file_of(name) + ": tensor '" + name + "' has dtype " +
                                        std::string(c10::toString(t.scalar_type())) + ", not a floating type");
  torch::Tensor out = t.to(device_, dtype_).contiguous();
  const int64_t bytes = out.numel() * static_cast<int64_t>(out.element_size());
  if (huge_pages_ && out.device().is_cpu() && bytes >= kHugePageBytes) {
    const torch::Tensor moved = copy_to_huge_pages(out);
    if (moved.data_ptr() != out.data_ptr()) huge_page_bytes_ += bytes;
    out = moved;
  }
  if (out.data_ptr() != t.data_ptr()) folder_.drop_pages(name);  // the mapping's copy is not needed
  return out;
}

std::string HfWeightReader::prefix_of(const std::vector<std::string>& prefixes, const std::string& probe) const {
  for (const std::string& p : prefixes)
    if (folder_.has(p + probe)) return p;
  return "";
}

}  // namespace era
