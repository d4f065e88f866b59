#pragma once
// An image handed to a Request: a file path, encoded bytes (a PNG/JPEG held in memory) or raw
// pixels (a camera frame, a decoded texture). Whatever the source, the Session turns it into the
// same RGB matrix a decoded file gives and sends it through exactly the same preprocessing, so
// from_pixels() of the pixels a file decodes to yields bit-identical model inputs and answers.
//
// An Image is an immutable value: copies share the pixel data, and it may be passed between
// threads freely. from_pixels() and from_encoded() copy the caller's buffer, which may be freed
// as soon as they return.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace era {

// Layout of one pixel in an 8-bit buffer. Alpha is dropped (not blended), grey is replicated:
// what PIL's Image.convert("RGB") does.
enum class PixelFormat {
  kRGB8,   // 3 bytes: R, G, B
  kBGR8,   // 3 bytes: B, G, R (OpenCV's cv::Mat order)
  kRGBA8,  // 4 bytes: R, G, B, A
  kBGRA8,  // 4 bytes: B, G, R, A
  kGray8,  // 1 byte
};

class Image {
 public:
  // An image file, read when the request runs. Throws nothing here; a missing, corrupt or
  // oversized file makes the request throw era::Error(kImage) naming the path.
  static Image from_file(const std::string& path);

  // Copies `height` rows of `width` pixels, rows `stride_bytes` apart (>= width * bytes per
  // pixel). Throws era::Error(kImage) for a null buffer, a non-positive size, a short stride or
  // more than 8192 x 8192 pixels (a Session's own SessionOptions::max_image_pixels is checked
  // again when the request runs).
  static Image from_pixels(const uint8_t* data, int width, int height, int stride_bytes, PixelFormat format);

  // Copies an encoded image (PNG, JPEG, BMP, WebP, ...) held in memory; decoded when the request
  // runs, with the same checks as a file (kImage errors name `name`).
  static Image from_encoded(const uint8_t* data, size_t size, const std::string& name = "<in-memory image>");

  enum class Source { kFile, kEncoded, kPixels };
  Source source() const;
  // The path (kFile) or the name given to from_encoded (kEncoded); "<in-memory image>" for pixels.
  const std::string& name() const;
  // Size in pixels for kPixels; 0 for files and encoded images (known only once decoded).
  int width() const;
  int height() const;
  // kPixels: the pixels as tightly packed RGB rows (width * height * 3 bytes); kEncoded: the
  // encoded bytes; kFile: nullptr. size_bytes() gives the length.
  const uint8_t* data() const;
  size_t size_bytes() const;

 private:
  struct Data;
  explicit Image(std::shared_ptr<const Data> data);
  std::shared_ptr<const Data> data_;
};

}  // namespace era
