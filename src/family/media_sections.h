#pragma once
// Readers the families share for their manifest sections (family/llava_sections,
// family/qwen2_5_vl/qwen_sections): the Pillow filters and resize arithmetics an image or video
// processor may name, and a guard that keeps any JSON surprise a one-line kBundle error.
#include <nlohmann/json.hpp>
#include <string>

#include "era/error.h"
#include "image/pil_resize.h"
#include "model/manifest.h"

namespace era {

// `name` (the value of `dotted`) as one of Pillow's five filters, or refused naming the field.
PilFilter image_filter(const ManifestFields& f, const std::string& dotted, const std::string& name);
// The same for a video processor, whose torchvision resize knows bicubic and bilinear only.
PilFilter video_filter(const ManifestFields& f, const std::string& dotted, const std::string& name);
// `dotted` ("torch": torchvision's uint8 antialiased resize, or "pillow"), `fallback` when absent.
std::string resize_arithmetic(const ManifestFields& f, const std::string& dotted, const std::string& fallback);

// read() with a JSON type error of a shape the checks did not foresee turned into "WHERE: malformed (...)".
template <typename Read>
auto guarded_read(const Manifest& manifest, Read read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBundle, manifest.source + ": malformed (" + e.what() + ")");
  }
}

}  // namespace era
