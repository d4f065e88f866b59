#pragma once
// Internal header. What era's native models read from a Hugging Face folder besides the tensors
// themselves: config.json, and the tensors converted once to the session's dtype and device.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model/safetensors.h"

namespace era {

// Whether `dir` is a Hugging Face model folder rather than an era bundle: a config.json and no
// manifest.json.
bool is_hf_folder(const std::string& dir);

// `hf_dir`/config.json as a JSON object; an empty object where the folder has none. Throws
// era::Error(kBundle) naming the file for unreadable or invalid JSON.
nlohmann::json read_hf_config(const std::string& hf_dir);

class HfWeightReader {
 public:
  // `huge_pages`: on the CPU, tensors of 2 MiB or more are copied into transparent huge pages
  // (kernels/huge_pages.h: a decode step streams every decoder weight once).
  HfWeightReader(const SafetensorsFolder& folder, const torch::Device& device, torch::ScalarType dtype, bool huge_pages = false)
      : folder_(folder), device_(device), dtype_(dtype), huge_pages_(huge_pages) {}

  const SafetensorsFolder& folder() const { return folder_; }
  // The tensor, refused naming the file and the tensor unless its shape is `shape` and its dtype a
  // floating one, converted once to the session's dtype and device (on the CPU in the file's own
  // dtype it stays a view of the mapping: no copy at all, unless moved into huge pages). The pages
  // of the mapping a copy was made from are handed back (SafetensorsFile::drop_pages), so a model
  // is resident once.
  torch::Tensor read(const std::string& name, const std::vector<int64_t>& shape) const;
  // The same for a bias, undefined where the checkpoint has none.
  torch::Tensor bias(const std::string& name, int64_t width) const {
    return folder_.has(name) ? read(name, {width}) : torch::Tensor();
  }
  // The first of `prefixes` under which the folder holds `probe` (prefix + probe); "" where none.
  std::string prefix_of(const std::vector<std::string>& prefixes, const std::string& probe) const;
  // Bytes read into huge pages so far.
  int64_t huge_page_bytes() const { return huge_page_bytes_; }

 private:
  const SafetensorsFolder& folder_;
  torch::Device device_;
  torch::ScalarType dtype_;
  bool huge_pages_ = false;
  mutable int64_t huge_page_bytes_ = 0;
};

}  // namespace era
