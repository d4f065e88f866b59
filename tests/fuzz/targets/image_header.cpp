#include "fuzz_targets.h"
#include "image/image_io.h"
#include "targets/swallow.h"

// The header probe decides what is decoded; a small pixel limit keeps each run fast while the
// decoders still see every header the probe lets through.
int era::fuzz::image_header(const uint8_t* data, size_t size) {
  ERA_FUZZ_REFUSAL_IS_FINE({
    era::probe_image_header(data, size, "<fuzz>");
    era::ImageLimits limits;
    limits.max_pixels = 1 << 20;
    limits.max_file_bytes = 1 << 20;
    const cv::Mat rgb = era::decode_rgb_image(data, size, "<fuzz>", limits);
    if (rgb.type() != CV_8UC3 || !rgb.isContinuous()) __builtin_trap();  // the documented contract
  });
}
