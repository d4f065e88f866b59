#include "family/media_sections.h"

namespace era {

PilFilter image_filter(const ManifestFields& f, const std::string& dotted, const std::string& name) {
  const auto filter = pil_filter_from_name(name);
  f.require(filter.has_value(), dotted + " '" + name + "' is not one of box, bilinear, hamming, bicubic, lanczos");
  return *filter;
}

PilFilter video_filter(const ManifestFields& f, const std::string& dotted, const std::string& name) {
  f.require(name == "bicubic" || name == "bilinear", dotted + " '" + name + "' is not bicubic or bilinear");
  return *pil_filter_from_name(name);
}

std::string resize_arithmetic(const ManifestFields& f, const std::string& dotted, const std::string& fallback) {
  const std::string arithmetic = f.text_or(dotted, fallback);
  f.require(arithmetic == "torch" || arithmetic == "pillow", dotted + " '" + arithmetic + "' is not torch or pillow");
  return arithmetic;
}

}  // namespace era
