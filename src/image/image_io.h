#pragma once
// Image loading for the vision pipeline: what LLaVA's evaluation does with
// `Image.open(path).convert("RGB")` (no EXIF rotation, alpha dropped, grey/palette expanded),
// done with OpenCV, with safety checks before anything is decoded.
//
// Every problem with an image (missing, unreadable, truncated, not an image, too large) is an
// era::Error(ErrorCode::kImage) whose message starts with the path (or "<in-memory image>").
#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace era {

struct ImageLimits {
  int64_t max_pixels = 8192LL * 8192;    // refused from the header, before decoding
  int64_t max_file_bytes = 256LL << 20;  // refused from the file size, before reading
};

struct ImageHeader {
  int width = 0;
  int height = 0;
  std::string format;  // "PNG", "JPEG", "BMP", "GIF", "WEBP", "TIFF", "PNM"
};

// Reads only the header bytes of the file (magic number + the size fields) and returns the image
// size and format without decoding. Throws kImage for unreadable files and unrecognised formats.
ImageHeader probe_image_header(const std::string& path);

// The same on an encoded image held in memory; `name` is used in error messages.
ImageHeader probe_image_header(const uint8_t* data, size_t size, const std::string& name);

// Loads an image file as a contiguous CV_8UC3 RGB matrix. Refuses a missing path, a directory, an
// empty file, a file over limits.max_file_bytes and an image whose header declares more than
// limits.max_pixels (before decoding); refuses truncated PNG/JPEG/BMP/WebP data rather than
// returning a partially grey image.
cv::Mat load_rgb_image(const std::string& path, const ImageLimits& limits = {});

// The same on encoded bytes (e.g. an upload); `name` is used in error messages.
cv::Mat decode_rgb_image(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits = {});

// Copies raw 8-bit pixels (channels 1 = grey, 3 = RGB, 4 = RGBA; rows stride_bytes apart) into a
// contiguous CV_8UC3 RGB matrix: grey is replicated and alpha dropped, as PIL's convert("RGB").
cv::Mat rgb_from_buffer(const uint8_t* data, int width, int height, int channels, int stride_bytes,
                        const ImageLimits& limits = {});

}  // namespace era
