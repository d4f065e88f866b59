#include "era/options.h"
#include "fuzz_targets.h"
#include "targets/scratch_file.h"
#include "targets/swallow.h"

int era::fuzz::era_config(const uint8_t* data, size_t size) {
  const std::string path = scratch_folder_with("era-config", "era.json", data, size) + "/era.json";
  ERA_FUZZ_REFUSAL_IS_FINE(era::validate_era_options(era::load_era_options(path)));
}
