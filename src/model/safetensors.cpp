#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "era/error.h"
#include "util/input_file.h"

namespace era {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw Error(ErrorCode::kBundle, where + ": " + what);
}

std::string shown(const json& v) {
  std::string text = v.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The format's dtypes that LibTorch 1.13 and 2.x both have, with their sizes.
struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  uint64_t bytes;
};
constexpr DtypeInfo kDtypes[] = {{"F64", torch::kDouble, 8},    {"F32", torch::kFloat, 4}, {"F16", torch::kHalf, 2},
                                 {"BF16", torch::kBFloat16, 2}, {"I64", torch::kLong, 8},  {"I32", torch::kInt, 4},
                                 {"I16", torch::kShort, 2},     {"I8", torch::kChar, 1},   {"U8", torch::kByte, 1},
                                 {"BOOL", torch::kBool, 1}};

const DtypeInfo* dtype_info(const std::string& name) {
  for (const DtypeInfo& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string known_dtypes() {
  std::string out;
  for (const DtypeInfo& d : kDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

SafetensorsEntry read_entry(const std::string& name, const json& v, const std::string& where) {
  const std::string at = where + ": tensor '" + name + "'";
  if (name.empty()) refuse(where, "a tensor with an empty name");
  if (!v.is_object()) refuse(at, "is " + shown(v) + ", not {dtype, shape, data_offsets}");
  SafetensorsEntry e;
  e.name = name;
  if (!v.contains("dtype") || !v["dtype"].is_string()) refuse(at, "dtype is missing or not a string");
  e.dtype = v["dtype"].get<std::string>();
  const DtypeInfo* info = dtype_info(e.dtype);
  if (!info) refuse(at, "dtype " + e.dtype + " is not one era reads (" + known_dtypes() + ")");
  e.scalar_type = info->type;
  if (!v.contains("shape") || !v["shape"].is_array() || v["shape"].size() > 16)
    refuse(at, "shape must be a list of at most 16 dimensions");
  uint64_t count = 1;
  for (const json& d : v["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 48))
      refuse(at, "shape " + shown(v["shape"]) + " must hold non-negative integers");
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && count > std::numeric_limits<uint64_t>::max() / 16 / n)
      refuse(at, "shape " + shown(v["shape"]) + " is too large");
    count *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const json* offsets = v.contains("data_offsets") ? &v["data_offsets"] : nullptr;
  if (!offsets || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    refuse(at, "data_offsets must be [begin, end], two non-negative integers");
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.end < e.begin) refuse(at, "data_offsets " + shown(*offsets) + " end before they begin");
  if (e.end - e.begin != count * info->bytes)
    refuse(at, "data_offsets " + shown(*offsets) + " hold " + std::to_string(e.end - e.begin) + " bytes, but " + e.dtype + " " +
                   shape_text(e.shape) + " needs " + std::to_string(count * info->bytes));
  return e;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::string& header_json, uint64_t data_bytes, const std::string& where) {
  json j;
  try {
    j = json::parse(header_json);
  } catch (const json::exception& e) {
    refuse(where, std::string("the safetensors header is not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) refuse(where, "the safetensors header is not a JSON object");
  SafetensorsHeader h;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) refuse(where, "__metadata__ must be an object of strings");
      for (const auto& [k, m] : value.items()) {
        if (!m.is_string()) refuse(where, "__metadata__." + k + " = " + shown(m) + ": must be a string");
        h.metadata[k] = m.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(read_entry(key, value, where));
  }
  // As the reference library: the tensors tile the data section, in order, with no hole or overlap.
  std::sort(h.entries.begin(), h.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t next = 0;
  for (const SafetensorsEntry& e : h.entries) {
    if (e.begin != next)
      refuse(where + ": tensor '" + e.name + "'",
             "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] " +
                 (e.begin < next ? "overlap the tensor before" : "leave a hole after the tensor before") + " (it ends at " +
                 std::to_string(next) + ")");
    if (e.end > data_bytes)
      refuse(where + ": tensor '" + e.name + "'", "data_offsets end at " + std::to_string(e.end) + ", past the file's " +
                                                      std::to_string(data_bytes) + " data bytes (truncated?)");
    next = e.end;
  }
  if (next != data_bytes)
    refuse(where, "the tensors cover " + std::to_string(next) + " of the file's " + std::to_string(data_bytes) + " data bytes");
  return h;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const uint64_t size = check_input_file(path, "weights file", std::numeric_limits<uint64_t>::max() / 2, ErrorCode::kBundle);
  if (size < 8) refuse(path, "truncated: " + std::to_string(size) + " bytes, not even the 8-byte header length");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) refuse(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != size) {
    ::close(fd);
    refuse(path, "changed while it was being opened");
  }
  // Copy-on-write: a weight changed in place stays in this process.
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) refuse(path, std::string("cannot map: ") + std::strerror(errno));
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_bytes_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];  // little-endian
  if (header_bytes > kMaxSafetensorsHeader)
    refuse(path, "header length " + std::to_string(header_bytes) + " is over the 100 MB limit");
  if (header_bytes > size - 8)
    refuse(path, "truncated: the header is " + std::to_string(header_bytes) + " bytes but only " + std::to_string(size - 8) +
                     " follow its length");
  const std::string header(reinterpret_cast<const char*>(bytes + 8), header_bytes);
  file->header_ = parse_safetensors_header(header, size - 8 - header_bytes, path);
  file->data_ = bytes + 8 + header_bytes;
  for (size_t i = 0; i < file->header_.entries.size(); ++i) file->by_name_[file->header_.entries[i].name] = i;
  file->self_ = file;
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.entries[it->second];
}

torch::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) refuse(path_, "no tensor '" + name + "'");
  const auto options = torch::TensorOptions().dtype(e->scalar_type);
  void* at = const_cast<uint8_t*>(data_ + e->begin);
  const uint64_t element = torch::elementSize(e->scalar_type);
  if (reinterpret_cast<uintptr_t>(at) % element != 0) {  // older writers did not align: a copy
    return torch::from_blob(at, e->shape, options).clone();
  }
  // The view holds the mapping: the file outlives every tensor taken from it.
  std::shared_ptr<const SafetensorsFile> keep = self_.lock();
  return torch::from_blob(
      at, e->shape, [keep](void*) {}, options);
}

void SafetensorsFile::drop_pages(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data_ + e->begin), end = reinterpret_cast<uintptr_t>(data_ + e->end);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

SafetensorsFolder::SafetensorsFolder(const std::string& folder) : folder_(folder) {
  const std::string single = folder + "/model.safetensors";
  const std::string index_path = folder + "/model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    json index;
    try {
      index = json::parse(read_input_file(index_path, "weights index", 64 << 20, ErrorCode::kBundle));
    } catch (const json::exception& e) {
      refuse(index_path, std::string("not JSON (") + e.what() + ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      refuse(index_path, "weight_map is missing or not an object of tensor -> shard file");
    std::map<std::string, size_t> shard_of_file;
    std::map<std::string, std::string> file_of_tensor;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) refuse(index_path, "weight_map." + tensor + " = " + shown(shard) + ": must be a file name");
      const std::string file = shard.get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
        refuse(index_path, "weight_map." + tensor + " = \"" + file + "\": must name a file in the folder");
      if (!shard_of_file.count(file)) {
        const std::string shard_path = folder + "/" + file;
        if (!fs::exists(shard_path, ec))
          refuse(index_path, "weight_map." + tensor + " names the shard " + file + ", which is missing from " + folder);
        shard_of_file[file] = files_.size();
        files_.push_back(SafetensorsFile::open(shard_path));
      }
      const auto& opened = files_[shard_of_file[file]];
      if (!opened->find(tensor)) refuse(opened->path(), "has no tensor '" + tensor + "', which " + index_path + " puts there");
      where_[tensor] = shard_of_file[file];
    }
    // A shard's tensors the index does not name would be silently ignored: refused instead.
    for (const auto& f : files_)
      for (const SafetensorsEntry& e : f->header().entries)
        if (!where_.count(e.name) || files_[where_[e.name]] != f)
          refuse(f->path(), "holds tensor '" + e.name + "', which " + index_path + " does not put there");
    return;
  }
  if (!fs::exists(single, ec))
    refuse(folder, "no weights: neither model.safetensors nor model.safetensors.index.json (era reads safetensors only)");
  files_.push_back(SafetensorsFile::open(single));
  for (const SafetensorsEntry& e : files_[0]->header().entries) where_[e.name] = 0;
}

std::vector<std::string> SafetensorsFolder::names() const {
  std::vector<std::string> out;
  for (const auto& [name, at] : where_) out.push_back(name);
  return out;
}

const std::string& SafetensorsFolder::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) refuse(folder_, "no tensor '" + name + "' in its weights");
  return files_[it->second]->path();
}

torch::Tensor SafetensorsFolder::tensor(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) refuse(folder_, "no tensor '" + name + "' in its weights");
  return files_[it->second]->tensor(name);
}

void SafetensorsFolder::drop_pages(const std::string& name) const {
  const auto it = where_.find(name);
  if (it != where_.end()) files_[it->second]->drop_pages(name);
}

torch::Tensor SafetensorsFolder::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  torch::Tensor t = tensor(name);
  if (t.sizes().vec() != shape)
    refuse(file_of(name),
           "tensor '" + name + "' has shape " + shape_text(t.sizes().vec()) + ", the config implies " + shape_text(shape));
  return t;
}

}  // namespace era
