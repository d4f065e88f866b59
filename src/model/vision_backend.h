#pragma once
// Internal header. What computes a vision pass and its projection: the bundle's TorchScript
// vision.pt and projector.pt (model/torchscript_vision.h) or era's own C++ tower and projector over
// a Hugging Face folder's weights (model/native_vision.h). model/vision_encoder.h checks the input
// and hands the pass to one of them; both compute the same thing with the same roundings.
#include <torch/torch.h>

#include <memory>
#include <string>

#include "model/vision_output.h"

namespace era {

class VisionBackend {
 public:
  virtual ~VisionBackend() = default;
  virtual std::string name() const = 0;  // "torchscript" or "native"

  // Crops float32 [B, 3, S, S] on the model's device -> every output but `embeddings` / `project`.
  virtual VisionOutput encode(const torch::Tensor& pixels) = 0;
  // Native-resolution patches [P, patch_dim] of items with grids [items, 3] (Qwen2.5-VL's tower).
  virtual VisionOutput encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw) = 0;
  // The projector: features [B, N, C] -> [B, N, D].
  virtual torch::Tensor project(const torch::Tensor& features) = 0;
  // The projector's parameter `name` (LLaVA-NeXT's image_newline); undefined where it has none.
  virtual torch::Tensor parameter(const std::string& name) const = 0;
};

}  // namespace era
