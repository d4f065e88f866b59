#include <string>
#include <vector>

#include "fuzz_targets.h"
#include "targets/scratch_file.h"
#include "targets/swallow.h"
#include "text/tokenizer.h"

// A model that loads must also encode and decode: a broken model that loads and then crashes
// on the first prompt is as bad as one that crashes while loading.
int era::fuzz::tokenizer_model(const uint8_t* data, size_t size) {
  const std::string path = scratch_folder_with("tokenizer", "tokenizer.model", data, size) + "/tokenizer.model";
  ERA_FUZZ_REFUSAL_IS_FINE({
    era::Tokenizer tokenizer(path);
    const std::vector<int64_t> ids = tokenizer.encode("USER: <image>\nWhat is shown? ASSISTANT: a cat");
    (void)tokenizer.decode(ids);
    for (int64_t id = 0; id < tokenizer.size() && id < 64; ++id) (void)tokenizer.piece(id);
  });
}
