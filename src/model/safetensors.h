#pragma once
// Internal header. Hugging Face `.safetensors` weight files read by era itself: the file is
// memory-mapped (copy-on-write: a tensor written in place never reaches the file), its header is
// checked as the reference library checks it, and a tensor is a view of the mapping that keeps it
// alive (a copy only where the data is not aligned to its element size). A weights folder is one
// `model.safetensors`, or the shards a `model.safetensors.index.json` names.
//
// Every refusal is one era::Error(kBundle) naming the file and the tensor or field: a truncated
// file, a header whose offsets leave the data or leave holes in it, a shape that does not match
// its bytes, an unknown dtype, a missing shard, a tensor of the wrong shape.
#include <torch/script.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace era {

// One tensor of a header: its dtype as the file spells it ("BF16"), shape and byte range in the
// data section (after the 8-byte length and the header).
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  torch::ScalarType scalar_type = torch::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;        // in the order of their data
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only, as the format says)
};

// Largest header accepted (the reference library's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// The header's JSON text checked against a data section of `data_bytes`; `where` names the file.
SafetensorsHeader parse_safetensors_header(const std::string& header_json, uint64_t data_bytes, const std::string& where);

class SafetensorsFile {
 public:
  // Maps and checks `path`.
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const SafetensorsEntry* find(const std::string& name) const;
  // The tensor `name` on the CPU in the file's dtype; refused when absent.
  torch::Tensor tensor(const std::string& name) const;
  // Hands back to the OS the pages of the mapping that lie wholly inside tensor `name`'s bytes
  // (madvise MADV_DONTNEED): for a tensor the reader converted or copied, whose pages it touched
  // but no view holds, so that they stop counting in the process's resident memory while other
  // tensors of the file are still views of it. A view of that range must not be used after.
  void drop_pages(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> by_name_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint8_t* data_ = nullptr;  // the data section inside the mapping
  std::weak_ptr<const SafetensorsFile> self_;
};

// The weights of a Hugging Face folder: `model.safetensors`, or `model.safetensors.index.json`
// and every shard its weight_map names (all opened and checked at once: a missing or broken shard
// stops the load before any weight is used).
class SafetensorsFolder {
 public:
  explicit SafetensorsFolder(const std::string& folder);

  const std::string& folder() const { return folder_; }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const;
  // The file that holds `name` (for messages).
  const std::string& file_of(const std::string& name) const;
  torch::Tensor tensor(const std::string& name) const;
  // The same, refused naming the file and the tensor unless its shape is `shape`.
  torch::Tensor tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  void drop_pages(const std::string& name) const;  // SafetensorsFile::drop_pages

 private:
  std::string folder_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor -> index into files_
};

}  // namespace era
