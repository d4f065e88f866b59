#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_targets.h"
#include "targets/scratch_file.h"
#include "targets/swallow.h"
#include "text/tokenizer.h"
#include "util/utf8.h"

// Through the Tokenizer constructor, as a bundle loads its tokenizer.json: JSON, added tokens,
// normalizer, pre-tokenizer patterns (ICU), vocabulary ids, merges, decoder. A file that loads
// must then encode and decode: once a fixed chat prompt, and once a text made of the input's own
// bytes (made valid UTF-8), so the file's Split patterns and merges meet text that has their
// characters.
int era::fuzz::tokenizer_json(const uint8_t* data, size_t size) {
  const std::string path = scratch_folder_with("tokenizer-json", "tokenizer.json", data, size) + "/tokenizer.json";
  const std::string own_text = utf8::lossy(std::string_view(reinterpret_cast<const char*>(data), std::min<size_t>(size, 4096)));
  ERA_FUZZ_REFUSAL_IS_FINE({
    const era::Tokenizer tokenizer(path);
    for (const std::string& text :
         {std::string("<|im_start|>user\n<image>\nWhat is shown? It's 42 \xF0\x9F\x98\x80 caf\xC3\xA9<|im_end|>\n"), own_text}) {
      try {
        const std::vector<int64_t> ids = tokenizer.encode(text);
        (void)tokenizer.decode(ids);
        (void)tokenizer.decode_growing(ids);
      } catch (const era::Error&) {  // a pattern refusing one text must not stop the other
      }
    }
    for (int64_t id = -1; id < tokenizer.size() && id < 64; ++id) (void)tokenizer.piece(id);
    (void)tokenizer.token_id("<|im_start|>");
  });
}
