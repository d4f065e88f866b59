#pragma once
// Stage 2 of the pipeline: pixels -> vision features and saliency -> projected visual tokens,
// computed by the bundle's TorchScript modules or era's own C++ tower (model/vision_backend.h).
#include <torch/script.h>

#include <memory>

#include "model/bundle.h"
#include "model/vision_backend.h"
#include "model/vision_output.h"

namespace era {

class VisionEncoder {
 public:
  explicit VisionEncoder(ModelBundle& bundle);
  // "torchscript" or "native".
  std::string backend_name() const { return backend_->name(); }

  // `pixels`: float32 [B, 3, S, S] (CPU or the model's device).
  VisionOutput encode(const torch::Tensor& pixels);
  // Native-resolution towers (Qwen2.5-VL): `patches` float32 [P, patch_dim] of items with grids
  // `grid_thw` [items, 3] int64, all in one pass. The output is one row (B = 1) of every item's
  // tokens in order (P / merge^2 of them): features [1, N, C], saliency [1, H, N].
  VisionOutput encode_native(const torch::Tensor& patches, const torch::Tensor& grid_thw);
  // Either of the above, as the batch holds.
  VisionOutput encode(const VisionBatch& batch) {
    return batch.grid_thw.defined() ? encode_native(batch.pixel_values, batch.grid_thw) : encode(batch.pixel_values);
  }

 private:
  // The backend's outputs, projected.
  VisionOutput projected(VisionOutput out);
  ModelBundle& bundle_;
  std::shared_ptr<VisionBackend> backend_;
};

}  // namespace era
