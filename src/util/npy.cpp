#include "util/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "era/error.h"

namespace era {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;         // numpy.lib.format.ARRAY_ALIGN
constexpr size_t kGrowthDigits = 21;  // numpy.lib.format.GROWTH_AXIS_MAX_DIGITS

[[noreturn]] void fail(const std::string& path, const std::string& what) {
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
    if (!eat(c)) fail(path, std::string("malformed .npy header (expected '") + c + "'): " + s);
  }
  std::string string_literal() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail(path, "malformed .npy header (expected a string): " + s);
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) fail(path, "malformed .npy header (unterminated string): " + s);
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
    if (start == i || i - start > 18) fail(path, "malformed .npy header (bad dimension): " + s);
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
      if (w != "True" && w != "False") fail(path, "malformed .npy header (fortran_order): " + text);
      h.fortran_order = (w == "True");
      have_order = true;
    } else if (key == "shape") {
      h.shape = p.shape_tuple();
      have_shape = true;
    } else {
      fail(path, "unexpected key '" + key + "' in .npy header");
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) fail(path, "incomplete .npy header: " + text);
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

torch::Tensor read_npy(const std::string& path) {
  if (!host_is_little_endian()) fail(path, ".npy support requires a little-endian host");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open .npy file");
  char pre[kMagicLen + 2];
  if (!in.read(pre, sizeof(pre)) || std::memcmp(pre, kMagic, kMagicLen) != 0)
    fail(path, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(pre[kMagicLen]);
  size_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) fail(path, "truncated .npy header");
    header_len = b[0] | (size_t(b[1]) << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) fail(path, "truncated .npy header");
    header_len = b[0] | (size_t(b[1]) << 8) | (size_t(b[2]) << 16) | (size_t(b[3]) << 24);
    if (header_len > (64u << 20)) fail(path, "implausible .npy header length");
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major));
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len))) fail(path, "truncated .npy header");

  const NpyHeader h = parse_header(header, path);
  const DtypeInfo* dt = dtype_from_descr(h.descr);
  if (!dt) fail(path, "unsupported .npy dtype '" + h.descr + "' (want <f4, <f8, <i8, <i4 or |u1)");
  if (h.fortran_order) fail(path, "Fortran-ordered .npy arrays are not supported");

  int64_t numel = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && numel > (int64_t(1) << 40) / d) fail(path, "implausible .npy shape " + shape_repr(h.shape));
    numel *= d;
  }
  auto tensor = torch::empty(h.shape, torch::TensorOptions().dtype(dt->type));
  const auto nbytes = static_cast<std::streamsize>(numel * dt->itemsize);
  if (nbytes > 0 && !in.read(static_cast<char*>(tensor.data_ptr()), nbytes))
    fail(path, "truncated .npy data (expected " + std::to_string(nbytes) + " bytes for shape " +
                   shape_repr(h.shape) + ")");
  return tensor;
}

void write_npy(const std::string& path, const torch::Tensor& tensor) {
  if (!host_is_little_endian()) fail(path, ".npy support requires a little-endian host");
  if (!tensor.defined()) fail(path, "cannot write an undefined tensor");
  const DtypeInfo* dt = dtype_from_scalar(tensor.scalar_type());
  if (!dt)
    fail(path, std::string("unsupported dtype for .npy: ") + c10::toString(tensor.scalar_type()));
  const torch::Tensor t = tensor.to(torch::kCPU).contiguous();

  const std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  std::string dict = std::string("{'descr': '") + dt->descr + "', 'fortran_order': False, 'shape': " +
                     shape_repr(shape) + ", }";
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
  if (!out) fail(path, "cannot create .npy file");
  out.write(kMagic, kMagicLen);
  const char ver[2] = {static_cast<char>(major), 0};
  out.write(ver, 2);
  const size_t hl = header.size();
  if (major == 1) {
    const char b[2] = {static_cast<char>(hl & 0xFF), static_cast<char>((hl >> 8) & 0xFF)};
    out.write(b, 2);
  } else {
    const char b[4] = {static_cast<char>(hl & 0xFF), static_cast<char>((hl >> 8) & 0xFF),
                       static_cast<char>((hl >> 16) & 0xFF), static_cast<char>((hl >> 24) & 0xFF)};
    out.write(b, 4);
  }
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  const auto nbytes = static_cast<std::streamsize>(t.numel() * dt->itemsize);
  if (nbytes > 0) out.write(static_cast<const char*>(t.data_ptr()), nbytes);
  out.close();
  if (!out) fail(path, "failed writing .npy file");
}

}  // namespace era
