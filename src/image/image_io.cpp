#include "image/image_io.h"
#include "image/gif_decode.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "era/error.h"

namespace era {
namespace {

namespace fs = std::filesystem;

const char kMemoryName[] = "<in-memory image>";

[[noreturn]] void fail_image(const std::string& name, const std::string& what) {
  throw Error(ErrorCode::kImage, name + ": " + what);
}

// ---- random-access byte sources ------------------------------------------------------------

class ByteReader {
 public:
  virtual ~ByteReader() = default;
  virtual uint64_t size() const = 0;
  // Copies n bytes at `offset` into dst; false when they are not all there.
  virtual bool read(uint64_t offset, void* dst, size_t n) = 0;
};

class MemoryReader : public ByteReader {
 public:
  MemoryReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, void* dst, size_t n) override {
    if (offset > size_ || n > size_ - offset) return false;
    if (n) std::memcpy(dst, data_ + offset, n);
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

class FileReader : public ByteReader {
 public:
  FileReader(std::ifstream& in, uint64_t size) : in_(in), size_(size) {}
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, void* dst, size_t n) override {
    if (offset > size_ || n > size_ - offset) return false;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n)));
  }

 private:
  std::ifstream& in_;
  uint64_t size_;
};

uint32_t be16(const uint8_t* p) { return (uint32_t(p[0]) << 8) | p[1]; }
uint32_t le16(const uint8_t* p) { return (uint32_t(p[1]) << 8) | p[0]; }
uint32_t be32(const uint8_t* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }
uint32_t le32(const uint8_t* p) { return (uint32_t(p[3]) << 24) | (uint32_t(p[2]) << 16) | (uint32_t(p[1]) << 8) | p[0]; }
uint32_t le24(const uint8_t* p) { return (uint32_t(p[2]) << 16) | (uint32_t(p[1]) << 8) | p[0]; }

// ---- per-format header parsers (sizes only, nothing is decoded) ----------------------------

struct Dims {
  int64_t width = 0, height = 0;
};

Dims probe_png(ByteReader& r, const std::string& name) {
  uint8_t b[24];
  if (!r.read(0, b, sizeof(b))) fail_image(name, "truncated PNG header");
  if (std::memcmp(b + 12, "IHDR", 4) != 0) fail_image(name, "corrupt PNG (first chunk is not IHDR)");
  return {be32(b + 16), be32(b + 20)};
}

Dims probe_jpeg(ByteReader& r, const std::string& name) {
  uint64_t pos = 2;  // after SOI
  uint8_t b[9];
  while (true) {
    // A marker: one or more 0xFF fill bytes, then the marker code.
    if (!r.read(pos, b, 1)) fail_image(name, "truncated JPEG header (no SOF marker)");
    if (b[0] != 0xFF) {  // stray bytes between segments: libjpeg skips them (with a warning)
      ++pos;
      continue;
    }
    uint8_t code = 0xFF;
    while (code == 0xFF) {
      ++pos;
      if (!r.read(pos, &code, 1)) fail_image(name, "truncated JPEG header (no SOF marker)");
    }
    ++pos;                                                                         // now just past the marker code
    if (code == 0xD8 || code == 0x01 || (code >= 0xD0 && code <= 0xD7)) continue;  // no length field
    if (code == 0xD9 || code == 0xDA) fail_image(name, "corrupt JPEG (no SOF marker before the image data)");
    if (!r.read(pos, b, 2)) fail_image(name, "truncated JPEG header");
    const uint32_t len = be16(b);
    if (len < 2) fail_image(name, "corrupt JPEG header (bad segment length)");
    const bool sof = code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC;
    if (sof) {
      if (len < 7 || !r.read(pos, b, 7)) fail_image(name, "truncated JPEG frame header");
      const uint32_t h = be16(b + 3), w = be16(b + 5);
      if (h == 0) fail_image(name, "unsupported JPEG (height defined by a DNL marker)");
      return {w, h};
    }
    pos += len;
  }
}

Dims probe_bmp(ByteReader& r, const std::string& name) {
  uint8_t b[26];
  if (!r.read(0, b, 18)) fail_image(name, "truncated BMP header");
  const uint32_t dib = le32(b + 14);
  if (dib == 12) {  // OS/2 BITMAPCOREHEADER: 16-bit sizes
    if (!r.read(0, b, 22)) fail_image(name, "truncated BMP header");
    return {le16(b + 18), le16(b + 20)};
  }
  if (dib < 16 || !r.read(0, b, 26)) fail_image(name, "truncated or corrupt BMP header");
  const int32_t w = static_cast<int32_t>(le32(b + 18));
  const int32_t h = static_cast<int32_t>(le32(b + 22));  // negative: top-down rows
  return {w, h == INT32_MIN ? -int64_t(INT32_MIN) : std::abs(int64_t(h))};
}

Dims probe_gif(ByteReader& r, const std::string& name) {
  uint8_t b[10];
  if (!r.read(0, b, sizeof(b))) fail_image(name, "truncated GIF header");
  return {le16(b + 6), le16(b + 8)};  // logical screen size
}

Dims probe_webp(ByteReader& r, const std::string& name) {
  uint8_t b[30];
  if (!r.read(0, b, 16)) fail_image(name, "truncated WebP header");
  if (std::memcmp(b + 12, "VP8 ", 4) == 0) {  // lossy: key frame header
    if (!r.read(0, b, 30)) fail_image(name, "truncated WebP (VP8) header");
    if (b[23] != 0x9D || b[24] != 0x01 || b[25] != 0x2A) fail_image(name, "corrupt WebP (bad VP8 start code)");
    return {le16(b + 26) & 0x3FFF, le16(b + 28) & 0x3FFF};
  }
  if (std::memcmp(b + 12, "VP8L", 4) == 0) {  // lossless: 14-bit width-1, 14-bit height-1
    if (!r.read(0, b, 25)) fail_image(name, "truncated WebP (VP8L) header");
    if (b[20] != 0x2F) fail_image(name, "corrupt WebP (bad VP8L signature)");
    const uint32_t bits = le32(b + 21);
    return {(bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1};
  }
  if (std::memcmp(b + 12, "VP8X", 4) == 0) {  // extended: 24-bit canvas width-1, height-1
    if (!r.read(0, b, 30)) fail_image(name, "truncated WebP (VP8X) header");
    return {le24(b + 24) + 1, le24(b + 27) + 1};
  }
  fail_image(name, "unsupported WebP variant");
}

Dims probe_tiff(ByteReader& r, const std::string& name) {
  uint8_t b[12];
  if (!r.read(0, b, 8)) fail_image(name, "truncated TIFF header");
  const bool le = b[0] == 'I';
  auto u16 = [le](const uint8_t* p) { return le ? le16(p) : be16(p); };
  auto u32 = [le](const uint8_t* p) { return le ? le32(p) : be32(p); };
  if (u16(b + 2) == 43) fail_image(name, "BigTIFF images are not supported");
  const uint64_t ifd = u32(b + 4);
  if (!r.read(ifd, b, 2)) fail_image(name, "truncated TIFF (first IFD missing)");
  const uint32_t count = u16(b);
  int64_t width = -1, height = -1;
  for (uint32_t e = 0; e < count; ++e) {
    if (!r.read(ifd + 2 + 12ull * e, b, 12)) fail_image(name, "truncated TIFF (IFD entry missing)");
    const uint32_t tag = u16(b), type = u16(b + 2);
    if (tag != 256 && tag != 257) continue;
    int64_t v;
    if (type == 3) v = u16(b + 8);       // SHORT, left-justified in the value field
    else if (type == 4) v = u32(b + 8);  // LONG
    else fail_image(name, "corrupt TIFF (bad ImageWidth/ImageLength type)");
    (tag == 256 ? width : height) = v;
  }
  if (width < 0 || height < 0) fail_image(name, "corrupt TIFF (no ImageWidth/ImageLength)");
  return {width, height};
}

Dims probe_pnm(ByteReader& r, const std::string& name) {
  // "P1".."P6", then width and height as ASCII decimals separated by whitespace / # comments.
  uint64_t pos = 2;
  auto next_int = [&]() -> int64_t {
    uint8_t c;
    while (true) {
      if (!r.read(pos, &c, 1)) fail_image(name, "truncated PNM header");
      if (c == '#') {
        while (r.read(pos, &c, 1) && c != '\n' && c != '\r') ++pos;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
        ++pos;
      } else {
        break;
      }
    }
    int64_t v = 0;
    int digits = 0;
    while (r.read(pos, &c, 1) && c >= '0' && c <= '9') {
      if (++digits > 12) fail_image(name, "corrupt PNM header (size too long)");
      v = v * 10 + (c - '0');
      ++pos;
    }
    if (!digits) fail_image(name, "corrupt PNM header");
    // OpenCV's reader takes the byte after a number as its delimiter, whatever it is: "2501#3\n"
    // is width 2501 and height 3 for it, while a comment here would hide the 3 from this probe.
    // The probe must see the sizes the decoder will allocate, so only whitespace may follow.
    if (!r.read(pos, &c, 1) || !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'))
      fail_image(name, "corrupt PNM header (a size must be followed by whitespace)");
    return v;
  };
  const int64_t w = next_int();
  const int64_t h = next_int();
  return {w, h};
}

ImageHeader probe(ByteReader& r, const std::string& name) {
  uint8_t m[12] = {0};
  const size_t have = static_cast<size_t>(std::min<uint64_t>(r.size(), sizeof(m)));
  if (have == 0) fail_image(name, "empty file");
  r.read(0, m, have);

  ImageHeader hdr;
  Dims d;
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (have >= 8 && std::memcmp(m, kPng, 8) == 0) {
    hdr.format = "PNG";
    d = probe_png(r, name);
  } else if (have >= 3 && m[0] == 0xFF && m[1] == 0xD8 && m[2] == 0xFF) {
    hdr.format = "JPEG";
    d = probe_jpeg(r, name);
  } else if (have >= 2 && m[0] == 'B' && m[1] == 'M') {
    hdr.format = "BMP";
    d = probe_bmp(r, name);
  } else if (have >= 6 && (std::memcmp(m, "GIF87a", 6) == 0 || std::memcmp(m, "GIF89a", 6) == 0)) {
    hdr.format = "GIF";
    d = probe_gif(r, name);
  } else if (have >= 12 && std::memcmp(m, "RIFF", 4) == 0 && std::memcmp(m + 8, "WEBP", 4) == 0) {
    hdr.format = "WEBP";
    d = probe_webp(r, name);
  } else if (have >= 4 && ((m[0] == 'I' && m[1] == 'I' && (m[2] == 42 || m[2] == 43) && m[3] == 0) ||
                           (m[0] == 'M' && m[1] == 'M' && m[2] == 0 && (m[3] == 42 || m[3] == 43)))) {
    hdr.format = "TIFF";
    d = probe_tiff(r, name);
  } else if (have >= 3 && m[0] == 'P' && m[1] >= '1' && m[1] <= '6' &&
             (m[2] == ' ' || m[2] == '\n' || m[2] == '\r' || m[2] == '\t' || m[2] == '#')) {
    hdr.format = "PNM";
    d = probe_pnm(r, name);
  } else {
    fail_image(name,
               "not a supported image (unrecognised file signature; expected PNG, JPEG, WebP, BMP, TIFF, "
               "PNM or GIF)");
  }
  if (d.width <= 0 || d.height <= 0 || d.width > INT_MAX || d.height > INT_MAX)
    fail_image(name,
               "corrupt " + hdr.format + " header (image size " + std::to_string(d.width) + "x" + std::to_string(d.height) + ")");
  hdr.width = static_cast<int>(d.width);
  hdr.height = static_cast<int>(d.height);
  return hdr;
}

void check_pixel_limit(const ImageHeader& h, const ImageLimits& limits, const std::string& name) {
  const int64_t pixels = int64_t(h.width) * h.height;
  if (pixels > limits.max_pixels)
    fail_image(name, h.format + " image is " + std::to_string(h.width) + "x" + std::to_string(h.height) + " (" +
                         std::to_string(pixels) + " pixels), over the limit of " + std::to_string(limits.max_pixels) + " pixels");
}

// ---- completeness checks on the whole encoded file (so truncation is never silent) ---------

bool jpeg_complete(const uint8_t* d, size_t n) {
  size_t i = 2;
  bool in_scan = false;
  while (i < n) {
    if (in_scan) {
      // Entropy-coded data: 0xFF 0x00 is a stuffed byte and RSTn markers stay inside the scan.
      const uint8_t* ff = static_cast<const uint8_t*>(std::memchr(d + i, 0xFF, n - i));
      if (!ff) return false;
      size_t j = static_cast<size_t>(ff - d) + 1;
      while (j < n && d[j] == 0xFF) ++j;
      if (j >= n) return false;
      const uint8_t code = d[j];
      if (code == 0x00 || (code >= 0xD0 && code <= 0xD7)) {
        i = j + 1;
        continue;
      }
      in_scan = false;
      i = static_cast<size_t>(ff - d);
      continue;
    }
    if (d[i] != 0xFF) {  // stray bytes between segments: libjpeg skips them too
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < n && d[j] == 0xFF) ++j;
    if (j >= n) return false;
    const uint8_t code = d[j];
    if (code == 0xD9) return true;  // EOI
    if (code == 0x00 || code == 0x01 || code == 0xD8 || (code >= 0xD0 && code <= 0xD7)) {
      i = j + 1;
      continue;
    }
    if (j + 2 >= n) return false;
    const size_t len = be16(d + j + 1);
    if (len < 2 || j + 1 + len > n) return false;
    if (code == 0xDA) in_scan = true;
    i = j + 1 + len;
  }
  return false;
}

bool png_complete(const uint8_t* d, size_t n) {
  size_t i = 8;
  bool idat = false;
  while (i + 12 <= n) {
    const uint64_t len = be32(d + i);
    if (len > 0x7FFFFFFFu || i + 12 + len > n) return false;
    if (std::memcmp(d + i + 4, "IDAT", 4) == 0) idat = true;
    if (std::memcmp(d + i + 4, "IEND", 4) == 0) return idat;
    i += 12 + static_cast<size_t>(len);
  }
  return false;
}

bool bmp_complete(const uint8_t* d, size_t n, const ImageHeader& h) {
  if (n < 30) return false;
  const uint64_t offbits = le32(d + 10);
  const uint32_t dib = le32(d + 14);
  uint32_t bpp, compression = 0;
  if (dib == 12) {
    bpp = le16(d + 24);
  } else {
    if (n < 34) return false;
    bpp = le16(d + 28);
    compression = le32(d + 30);
  }
  if (compression != 0 && compression != 3 && compression != 6) return true;  // RLE etc.: decoder's job
  const uint64_t stride = ((uint64_t(bpp) * h.width + 31) / 32) * 4;
  return offbits + stride * uint64_t(h.height) <= n;
}

bool webp_complete(const uint8_t* d, size_t n) { return n >= 8 && uint64_t(le32(d + 4)) + 8 <= n; }

void check_complete(const uint8_t* d, size_t n, const ImageHeader& h, const std::string& name) {
  bool ok = true;
  if (h.format == "JPEG") ok = jpeg_complete(d, n);
  else if (h.format == "PNG") ok = png_complete(d, n);
  else if (h.format == "BMP") ok = bmp_complete(d, n, h);
  else if (h.format == "WEBP") ok = webp_complete(d, n);
  if (!ok)
    fail_image(name, "truncated or corrupt " + h.format + " file (" + std::to_string(n) + " bytes; image data ends early)");
}

// Checks the path names a readable, non-empty regular file within the size limit; returns its size.
uint64_t check_file(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail_image(path, "no such file");
  if (fs::is_directory(st)) fail_image(path, "is a directory, not an image file");
  if (!fs::is_regular_file(st)) fail_image(path, "is not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) fail_image(path, "cannot read file size: " + ec.message());
  if (size == 0) fail_image(path, "empty file (0 bytes)");
  if (max_bytes >= 0 && size > static_cast<uintmax_t>(max_bytes))
    fail_image(path, "file is " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes) + " bytes");
  return size;
}

cv::Mat decode_checked(const uint8_t* data, size_t size, const ImageHeader& hdr, const std::string& name) {
  check_complete(data, size, hdr, name);
  if (hdr.format == "GIF") return decode_gif_first_frame(data, size, name);  // OpenCV 4.6 has no GIF decoder
  // 16-bit greyscale PNG: Pillow opens it as mode "I" and convert("RGB") saturates each value to
  // 0..255 (it does not take the high byte, as OpenCV's 8-bit conversion does). Everything else
  // (16-bit RGB/RGBA/LA: high byte; palette, 1/2/4-bit grey, alpha) already matches IMREAD_COLOR.
  const bool png_grey16 = hdr.format == "PNG" && size > 25 && data[24] == 16 && data[25] == 0;
  cv::Mat bgr;
  try {
    const cv::Mat buf(1, static_cast<int>(size), CV_8UC1, const_cast<uint8_t*>(data));
    if (png_grey16) {
      const cv::Mat grey = cv::imdecode(buf, cv::IMREAD_GRAYSCALE | cv::IMREAD_ANYDEPTH | cv::IMREAD_IGNORE_ORIENTATION);
      if (!grey.empty()) {
        if (grey.type() != CV_16UC1) fail_image(name, "decoder returned an unexpected pixel format for a 16-bit PNG");
        cv::Mat grey8;
        grey.convertTo(grey8, CV_8U);  // saturating: min(v, 255), as Pillow's I -> RGB
        cv::cvtColor(grey8, bgr, cv::COLOR_GRAY2BGR);
      }
    } else {
      bgr = cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
    }
  } catch (const cv::Exception& e) {
    fail_image(name, "cannot decode " + hdr.format + " image: " + e.what());
  }
  if (bgr.empty()) {
    fail_image(name, "cannot decode " + hdr.format + " image (corrupt or unsupported data)");
  }
  if (bgr.type() != CV_8UC3) fail_image(name, "decoder returned an unexpected pixel format");
  if (bgr.cols != hdr.width || bgr.rows != hdr.height)
    fail_image(name, "decoded size " + std::to_string(bgr.cols) + "x" + std::to_string(bgr.rows) + " differs from the header's " +
                         std::to_string(hdr.width) + "x" + std::to_string(hdr.height));
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  if (!rgb.isContinuous()) rgb = rgb.clone();
  return rgb;
}

}  // namespace

ImageHeader probe_image_header(const std::string& path) {
  const uint64_t size = check_file(path, -1);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_image(path, "cannot open file for reading");
  FileReader reader(in, size);
  return probe(reader, path);
}

ImageHeader probe_image_header(const uint8_t* data, size_t size, const std::string& name) {
  if (!data && size) fail_image(name, "null image buffer");
  MemoryReader reader(data, size);
  return probe(reader, name);
}

cv::Mat load_rgb_image(const std::string& path, const ImageLimits& limits) {
  const uint64_t size = check_file(path, limits.max_file_bytes);
  if (size > static_cast<uint64_t>(INT_MAX)) fail_image(path, "file too large to decode");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_image(path, "cannot open file for reading");

  // Header first, straight from the file: an oversized image is refused before it is read or decoded.
  ImageHeader hdr;
  {
    FileReader reader(in, size);
    hdr = probe(reader, path);
  }
  check_pixel_limit(hdr, limits, path);

  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.clear();
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) fail_image(path, "read error");
  return decode_checked(bytes.data(), bytes.size(), hdr, path);
}

cv::Mat decode_rgb_image(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits) {
  const std::string& n = name.empty() ? std::string(kMemoryName) : name;
  if (size == 0) fail_image(n, "empty image data (0 bytes)");
  if (!data) fail_image(n, "null image buffer");
  if (limits.max_file_bytes >= 0 && size > static_cast<uint64_t>(limits.max_file_bytes))
    fail_image(n, "encoded image is " + std::to_string(size) + " bytes, over the limit of " +
                      std::to_string(limits.max_file_bytes) + " bytes");
  if (size > static_cast<size_t>(INT_MAX)) fail_image(n, "encoded image too large to decode");
  MemoryReader reader(data, size);
  const ImageHeader hdr = probe(reader, n);
  check_pixel_limit(hdr, limits, n);
  return decode_checked(data, size, hdr, n);
}

cv::Mat rgb_from_buffer(const uint8_t* data, int width, int height, int channels, int stride_bytes, const ImageLimits& limits) {
  const std::string n = kMemoryName;
  if (!data) fail_image(n, "null pixel buffer");
  if (width <= 0 || height <= 0) fail_image(n, "bad size " + std::to_string(width) + "x" + std::to_string(height));
  if (channels != 1 && channels != 3 && channels != 4)
    fail_image(n, "unsupported channel count " + std::to_string(channels) + " (want 1, 3 or 4)");
  if (int64_t(stride_bytes) < int64_t(width) * channels)
    fail_image(n, "row stride " + std::to_string(stride_bytes) +
                      " is smaller than width * channels = " + std::to_string(int64_t(width) * channels));
  const ImageHeader hdr{width, height, "raw"};
  check_pixel_limit(hdr, limits, n);

  const int type = CV_MAKETYPE(CV_8U, channels);
  const cv::Mat view(height, width, type, const_cast<uint8_t*>(data), static_cast<size_t>(stride_bytes));
  cv::Mat rgb(height, width, CV_8UC3);
  if (channels == 3) {
    view.copyTo(rgb);
  } else if (channels == 1) {
    cv::cvtColor(view, rgb, cv::COLOR_GRAY2RGB);
  } else {
    cv::cvtColor(view, rgb, cv::COLOR_RGBA2RGB);
  }
  return rgb;
}

}  // namespace era
