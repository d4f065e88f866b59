#pragma once
// LLaVA-NeXT "anyres" preprocessing (transformers' LlavaNextImageProcessor): choose a tile grid from
// the pinpoints, resize (Pillow bicubic) and pad (black) to it, cut 336 px tiles row-major, and
// squash the whole image to one extra 336 px base crop.
#include <opencv2/core.hpp>

#include "family/clip_preprocess.h"
#include "image/pil_resize.h"

#include <cstdint>
#include <vector>

namespace era {

// A (height, width) pair: an image's size, an anyres grid pinpoint.
struct Resolution {
  int64_t height = 0;
  int64_t width = 0;
  bool operator==(const Resolution& o) const { return height == o.height && width == o.width; }
};

// HF's select_best_resolution: the candidate (height, width) that keeps the most of the image's
// pixels after an aspect-preserving fit, then the least waste; earlier candidates win ties (HF
// reads the pinpoint pairs as (height, width); the original LLaVA code as (width, height), which
// flips the choice between the two 2-tile layouts for images of at most ~336 px: this project
// follows HF, so a 336x336 image gets 336x672 = 1 row x 2 columns). Python float semantics:
// scale = min(w / W0, h / H0); effective = min(int(W0 * scale) * int(H0 * scale), W0 * H0);
// waste = w * h - effective; a candidate replaces the best if its effective is larger, or equal
// with strictly less waste. Throws era::Error(kInvalidArgument) for empty candidates or sizes <= 0.
Resolution select_best_resolution(const Resolution& original, const std::vector<Resolution>& candidates);

struct AnyresCrops {
  Resolution original;  // the decoded image
  Resolution best;      // the chosen pinpoint
  int64_t rows = 0;     // tile grid: best.height / tile, best.width / tile
  int64_t cols = 0;
  std::vector<cv::Mat> crops;  // uint8 RGB tile x tile: [0] the base image, then rows*cols tiles row-major
};

// `rgb`: CV_8UC3. Pinpoints are (height, width), HF's reading. Steps (HF-PIL LlavaNextImageProcessor):
//   best = select_best_resolution((H0, W0), pinpoints)
//   sw = Wt / W0, sh = Ht / H0 (doubles); if sw < sh: nw = Wt, nh = min(ceil(H0 * sw), Ht)
//                                          else:     nh = Ht, nw = min(ceil(W0 * sh), Wt)
//   (ceil of the double product as computed, like Python's math.ceil; not int(), not round())
//   Pillow-exact bicubic resize to nw x nh, pasted on a black Wt x Ht canvas at
//   ((Wt - nw) / 2, (Ht - nh) / 2) floored; tiles cut row-major;
//   base = the original image squashed to base_size x base_size (HF: size.shortest_edge; 0 means
//   tile) with the same filter (a copy if already so).
// Every resize uses `filter` (HF: the processor's resample). HF then runs each crop through the
// CLIP resize + centre crop (clip_resize_crop), which is the identity when base_size == tile;
// that step is the caller's (LlavaNextFamily), so these crops are the processor's patches.
// Throws era::Error(kInvalidArgument) for a bad image, a non-positive tile, empty pinpoints or
// pinpoints that are not positive multiples of `tile`.
AnyresCrops make_anyres_crops(const cv::Mat& rgb, const std::vector<Resolution>& pinpoints, int tile,
                              PilFilter filter = PilFilter::kBicubic, int base_size = 0);

// What HF's LlavaNextImageProcessor (PIL backend) gives the vision tower, as uint8 crops: the
// base image and tiles of make_anyres_crops (tile = clip.size, base = clip.resize_edge(), filter =
// clip.filter), each then through clip_resize_crop (resize its shortest edge to
// clip.resize_edge(), centre crop clip.size): a tile is resized and cropped back only when the
// checkpoint's size.shortest_edge differs from its crop_size. (clip.mode is not used: anyres
// never expands to a square.)
std::vector<cv::Mat> llava_next_crops(const cv::Mat& rgb, const std::vector<Resolution>& pinpoints, const ClipImageConfig& clip);

}  // namespace era
