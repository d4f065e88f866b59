#include "util/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "era/error.h"
#include "util/input_file.h"

namespace era {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;         // numpy.lib.format.ARRAY_ALIGN
constexpr size_t kGrowthDigits = 21;  // numpy.lib.format.GROWTH_AXIS_MAX_DIGITS
// Reference dumps and era_reduce inputs are features of one request: far below this.
constexpr uint64_t kMaxNpyBytes = uint64_t(4) << 30;

[[noreturn]] void fail_npy(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, path + ": " + what);
}

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

struct DtypeInfo {
  const char* descr;
  torch::ScalarType type;
  size_t itemsize;
};

const DtypeInfo kDtypes[] = {
    {"<f4", torch::kFloat32, 4}, {"<f8", torch::kFloat64, 8}, {"<i8", torch::kInt64, 8},
    {"<i4", torch::kInt32, 4},   {"|u1", torch::kUInt8, 1},
};

const DtypeInfo* dtype_from_descr(const std::string& d) {
  // uint8 may also be spelled "<u1" / ">u1" / "=u1"; byte order is irrelevant for one byte.
  if (d == "<u1" || d == ">u1" || d == "=u1") return &kDtypes[4];
  for (const auto& info : kDtypes)
    if (d == info.descr) return &info;
  return nullptr;
}

const DtypeInfo* dtype_from_scalar(torch::ScalarType t) {
  for (const auto& info : kDtypes)
    if (info.type == t) return &info;
  return nullptr;
}

// --- a tiny parser for the header's Python dict literal -------------------------------------

struct HeaderParser {
  const std::string& s;
  const std::string& path;
  size_t i = 0;

  void skip_ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip_ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail_npy(path, std::string("malformed .npy header (expected '") + c + "'): " + s);
  }
  std::string string_literal() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail_npy(path, "malformed .npy header (expected a string): " + s);
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) fail_npy(path, "malformed .npy header (unterminated string): " + s);
    return s.substr(start, i++ - start);
  }
  std::string word() {
    skip_ws();
    const size_t start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(start, i - start);
  }
  int64_t integer() {
    skip_ws();
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (start == i || i - start > 18) fail_npy(path, "malformed .npy header (bad dimension): " + s);
    int64_t v = std::stoll(s.substr(start, i - start));
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix
    return v;
  }
  std::vector<int64_t> shape_tuple() {
    expect('(');
    std::vector<int64_t> dims;
    if (eat(')')) return dims;
    while (true) {
      dims.push_back(integer());
      if (eat(')')) break;
      expect(',');
      if (eat(')')) break;
    }
    return dims;
  }
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

NpyHeader parse_header(const std::string& text, const std::string& path) {
  HeaderParser p{text, path};
  NpyHeader h;
  bool have_descr = false, have_order = false, have_shape = false;
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.string_literal();
    p.expect(':');
    if (key == "descr") {
      h.descr = p.string_literal();
      have_descr = true;
    } else if (key == "fortran_order") {
      const std::string w = p.word();
      if (w != "True" && w != "False") fail_npy(path, "malformed .npy header (fortran_order): " + text);
      h.fortran_order = (w == "True");
      have_order = true;
    } else if (key == "shape") {
      h.shape = p.shape_tuple();
      have_shape = true;
    } else {
      fail_npy(path, "unexpected key '" + key + "' in .npy header");
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) fail_npy(path, "incomplete .npy header: " + text);
  return h;
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '(';
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k) os << ", ";
    os << shape[k];
  }
  if (shape.size() == 1) os << ',';
  os << ')';
  return os.str();
}

}  // namespace

torch::Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  if (!host_is_little_endian()) fail_npy(name, ".npy support requires a little-endian host");
  // Every length below is checked against the bytes that are really there before it is used,
  // so a hostile header can neither read past the buffer nor make us allocate what is absent.
  size_t at = 0;
  auto take = [&](size_t n, const char* what) {
    if (size - at < n) fail_npy(name, std::string("truncated .npy ") + what);
    const uint8_t* p = data + at;
    at += n;
    return p;
  };
  const uint8_t* pre = take(kMagicLen + 2, "file (bad magic)");
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) fail_npy(name, "not a .npy file (bad magic)");
  const int major = pre[kMagicLen];
  size_t header_len = 0;
  if (major == 1) {
    const uint8_t* b = take(2, "header");
    header_len = b[0] | (size_t(b[1]) << 8);
  } else if (major == 2 || major == 3) {
    const uint8_t* b = take(4, "header");
    header_len = b[0] | (size_t(b[1]) << 8) | (size_t(b[2]) << 16) | (size_t(b[3]) << 24);
  } else {
    fail_npy(name, "unsupported .npy format version " + std::to_string(major));
  }
  const uint8_t* header_bytes = take(header_len, "header");
  const std::string header(reinterpret_cast<const char*>(header_bytes), header_len);

  const NpyHeader h = parse_header(header, name);
  const DtypeInfo* dt = dtype_from_descr(h.descr);
  if (!dt) fail_npy(name, "unsupported .npy dtype '" + h.descr + "' (want <f4, <f8, <i8, <i4 or |u1)");
  if (h.fortran_order) fail_npy(name, "Fortran-ordered .npy arrays are not supported");
  if (h.shape.size() > 32) fail_npy(name, "implausible .npy shape " + shape_repr(h.shape) + " (more than 32 axes)");

  // The element count may not exceed what the remaining bytes hold (checked by division, so the
  // product of hostile dimensions cannot overflow first).
  const size_t available = (size - at) / dt->itemsize;
  size_t numel = 1;
  for (int64_t d : h.shape) {
    if (d == 0) {
      numel = 0;
      break;
    }
  }
  if (numel != 0) {
    for (int64_t d : h.shape) {
      if (static_cast<uint64_t>(d) > available / numel)
        fail_npy(name, "truncated .npy data (shape " + shape_repr(h.shape) + " needs more than the " + std::to_string(size - at) +
                           " data bytes present)");
      numel *= static_cast<size_t>(d);
    }
  }
  const size_t nbytes = numel * dt->itemsize;
  take(nbytes, "data");
  auto tensor = torch::empty(h.shape, torch::TensorOptions().dtype(dt->type));
  if (nbytes > 0) std::memcpy(tensor.data_ptr(), data + (at - nbytes), nbytes);
  return tensor;
}

torch::Tensor read_npy(const std::string& path) {
  const std::string bytes = read_input_file(path, ".npy file", kMaxNpyBytes);
  return parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

void write_npy(const std::string& path, const torch::Tensor& tensor) {
  if (!host_is_little_endian()) fail_npy(path, ".npy support requires a little-endian host");
  if (!tensor.defined()) fail_npy(path, "cannot write an undefined tensor");
  const DtypeInfo* dt = dtype_from_scalar(tensor.scalar_type());
  if (!dt) fail_npy(path, std::string("unsupported dtype for .npy: ") + c10::toString(tensor.scalar_type()));
  const torch::Tensor t = tensor.to(torch::kCPU).contiguous();

  const std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  std::string dict = std::string("{'descr': '") + dt->descr + "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  // numpy leaves room to grow the last axis in place, then pads to ARRAY_ALIGN with a final '\n'.
  if (!shape.empty()) dict.append(kGrowthDigits - std::to_string(shape.back()).size(), ' ');
  auto padded = [&](size_t len_field) {
    const size_t hlen = dict.size() + 1;
    const size_t pad = kAlign - ((kMagicLen + 2 + len_field + hlen) % kAlign);
    return dict + std::string(pad, ' ') + '\n';
  };
  std::string header = padded(2);
  int major = 1;
  if (header.size() > 0xFFFF) {
    header = padded(4);
    major = 2;
  }

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail_npy(path, "cannot create .npy file");
  out.write(kMagic, kMagicLen);
  const char ver[2] = {static_cast<char>(major), 0};
  out.write(ver, 2);
  const size_t hl = header.size();
  if (major == 1) {
    const char b[2] = {static_cast<char>(hl & 0xFF), static_cast<char>((hl >> 8) & 0xFF)};
    out.write(b, 2);
  } else {
    const char b[4] = {static_cast<char>(hl & 0xFF), static_cast<char>((hl >> 8) & 0xFF), static_cast<char>((hl >> 16) & 0xFF),
                       static_cast<char>((hl >> 24) & 0xFF)};
    out.write(b, 4);
  }
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  const auto nbytes = static_cast<std::streamsize>(t.numel() * dt->itemsize);
  if (nbytes > 0) out.write(static_cast<const char*>(t.data_ptr()), nbytes);
  out.close();
  if (!out) fail_npy(path, "failed writing .npy file");
}

}  // namespace era
