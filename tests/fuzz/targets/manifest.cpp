#include "model/manifest.h"
#include "family/model_family.h"
#include "fuzz_targets.h"
#include "targets/scratch_file.h"
#include "targets/swallow.h"

// Through read_manifest, the function every bundle load calls (file checks, JSON, every common
// field), then the family's reading of its own sections, as the load does next.
int era::fuzz::manifest(const uint8_t* data, size_t size) {
  const std::string bundle = scratch_folder_with("manifest", "manifest.json", data, size);
  ERA_FUZZ_REFUSAL_IS_FINE(era::check_family_sections(era::read_manifest(bundle)));
}
