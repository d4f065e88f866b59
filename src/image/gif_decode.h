#pragma once
// GIF decoding with giflib: the first frame as Pillow's Image.open(...).convert("RGB") gives it
// (OpenCV before 4.11, Debian 12's included, has no GIF decoder).
#include <cstddef>
#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

namespace era {

// RGB (CV_8UC3, continuous) of the first image of a GIF: the logical screen, filled with the colour of the transparent index (or
// of index 0) where the first frame does not cover it, the frame's pixels mapped through its local colour table (else the global
// one; indices past the table are black), interlacing undone. Throws era::Error(kImage) naming `name` for corrupt or truncated
// data, and for a first frame reaching past the logical screen (Pillow would grow the picture; its size was checked on the
// screen's).
cv::Mat decode_gif_first_frame(const uint8_t* data, size_t size, const std::string& name);

}  // namespace era
