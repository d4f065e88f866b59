#include "family/frame_preprocess.h"

#include "era/error.h"
#include "image/pil_resize.h"

namespace era {

cv::Mat resize_video_frame(const cv::Mat& rgb, const LlavaVideoSpec& video) {
  const int s = static_cast<int>(video.size);
  const ResampleArithmetic arithmetic =
      video.arithmetic == "pillow" ? ResampleArithmetic::kPillow : ResampleArithmetic::kTorchUint8;
  return resize_u8(rgb, s, s, video.filter, arithmetic);
}

torch::Tensor normalize_video_frame(const cv::Mat& frame, const LlavaVideoSpec& video) {
  if (frame.type() != CV_8UC3 || frame.rows != video.size || frame.cols != video.size) {
    throw Error(ErrorCode::kRuntime, "normalize_video_frame: expects a " + std::to_string(video.size) + "x" +
                                         std::to_string(video.size) + " RGB frame");
  }
  return normalize_fused(frame, video.mean, video.std);
}

torch::Tensor normalize_fused(const cv::Mat& frame, const std::array<float, 3>& mean_in, const std::array<float, 3>& std_in) {
  if (frame.type() != CV_8UC3) throw Error(ErrorCode::kRuntime, "normalize_fused: expects an 8-bit RGB image");
  const cv::Mat contiguous = frame.isContinuous() ? frame : frame.clone();
  // HWC uint8 -> CHW float32; the fused rescale + normalise: (v - mean * 255) / (std * 255), each
  // factor a float32 product as torch computes it
  const torch::Tensor chw = torch::from_blob(const_cast<uint8_t*>(contiguous.data), {frame.rows, frame.cols, 3}, torch::kUInt8)
                                .permute({2, 0, 1})
                                .to(torch::kFloat);
  std::array<float, 3> mean{}, std{};
  for (int c = 0; c < 3; ++c) {
    mean[c] = mean_in[c] * 255.0f;
    std[c] = std_in[c] * 255.0f;
  }
  const auto m = torch::tensor({mean[0], mean[1], mean[2]}, torch::kFloat).view({3, 1, 1});
  const auto d = torch::tensor({std[0], std[1], std[2]}, torch::kFloat).view({3, 1, 1});
  return ((chw - m) / d).contiguous();
}

}  // namespace era
