#pragma once
// Minimal NumPy .npy reader/writer for reference dumps and debugging.
//
// Supported dtypes: float32, float64, int64, int32, uint8 (little-endian, C order). Reading
// accepts format versions 1.0, 2.0 and 3.0; writing emits 1.0 (2.0 only when the header would not
// fit) with the same header text and 64-byte alignment as numpy.save, so files are byte-identical
// to numpy's for the same array. Errors are era::Error(kInvalidArgument) naming the file.
#include <torch/script.h>

#include <string>

namespace era {

torch::Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const torch::Tensor& tensor);

}  // namespace era
