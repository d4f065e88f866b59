#include "fuzz_targets.h"
#include "model/safetensors.h"
#include "targets/scratch_file.h"
#include "targets/swallow.h"

// A weights folder of one model.safetensors: the mapping, the header checks, then every tensor
// read (converted, so each byte the header claims is touched).
int era::fuzz::safetensors(const uint8_t* data, size_t size) {
  const std::string folder = scratch_folder_with("safetensors", "model.safetensors", data, size);
  ERA_FUZZ_REFUSAL_IS_FINE({
    const era::SafetensorsFolder weights(folder);
    for (const std::string& name : weights.names()) (void)weights.tensor(name).to(torch::kDouble).sum().item<double>();
  });
}
