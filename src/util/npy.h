#pragma once
// Minimal NumPy .npy reader/writer for reference dumps and debugging.
//
// Supported dtypes: float32, float64, int64, int32, uint8 (little-endian, C order). Reading
// accepts format versions 1.0, 2.0 and 3.0; writing emits 1.0 (2.0 only when the header would not
// fit) with the same header text and 64-byte alignment as numpy.save, so files are byte-identical
// to numpy's for the same array. Errors are era::Error(kInvalidArgument) naming the file.
#include <torch/script.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace era {

// Reads a .npy file (a regular file of at most 4 GiB; FIFOs and devices are refused unopened).
torch::Tensor read_npy(const std::string& path);
// The same on bytes in memory; `name` is used in messages. Never reads past `size` and never
// allocates more than the bytes present can fill.
torch::Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name);
void write_npy(const std::string& path, const torch::Tensor& tensor);

}  // namespace era
