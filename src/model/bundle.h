#pragma once
// A loaded model bundle: manifest, the three TorchScript modules and the tokenizer, checked
// against each other so a wrong or damaged file fails at load time with a clear message rather
// than deep inside a forward pass.
#include <torch/script.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "model/manifest.h"
#include "text/tokenizer.h"

namespace era {

class NativeDecoder;  // model/native_decoder.h

struct ModelBundle {
  std::string dir;
  Manifest manifest;
  torch::jit::Module vision;
  torch::jit::Module projector;
  torch::jit::Module decoder;
  std::unique_ptr<Tokenizer> tokenizer;
  // era's own C++ decoder over a Hugging Face folder's weights, where the session was asked for
  // one (SessionOptions::decoder_weights): it then computes every decoder call instead of
  // decoder.pt (model/decoder.h).
  std::shared_ptr<NativeDecoder> native_decoder;
  torch::Device device{torch::kCPU};
  torch::ScalarType dtype = torch::kFloat;
  // Whether TorchScript optimises the modules' graphs (model/graph_optimizer.h): set by the
  // session, honoured by every call through GraphOptimizerScope.
  bool optimize_graphs = true;
  // Bytes of int8 weights freed after loading: the copies the quantisation engine kept beside its
  // packed ones (model/int8_weights.h); 0 for engines that keep none.
  int64_t int8_sources_freed = 0;
  // Bytes of decoder weights moved into transparent huge pages at load (model/huge_pages.h; CPU
  // only, 0 where Linux offers none).
  int64_t huge_page_bytes = 0;
  // Linears of the vision tower and projector whose weights were packed for oneDNN at load
  // (model/onednn_linear.h, model/cpu_matmul.h); 0 where none were.
  int onednn_packed_linears = 0;
  // Linears of the vision tower and projector routed through era::onednn_linear with plain
  // weights, their rows split between the threads (where LibTorch cannot pack: 1.13); 0 where none were.
  int row_split_linears = 0;
};

// Parses "float32"/"fp32"/"float16"/"fp16"/"half"/"bfloat16"/"bf16"; throws kInvalidArgument.
torch::ScalarType parse_dtype(const std::string& name);
std::string dtype_name(torch::ScalarType dtype);

// Checks of the modules that only the bundle's family knows (its vision tower and projector);
// throw era::Error(kBundle) naming the file and the mismatch.
using ModuleChecks = std::function<void(const ModelBundle&)>;

// What a bundle's family checks at load (family/model_family.h): its own manifest sections
// (check_family_sections), before any module is opened, and its modules as loaded
// (check_family_modules). Either may be empty.
struct FamilyChecks {
  std::function<void(const Manifest&)> sections;
  ModuleChecks modules;
};

// Loads DIR, moves the modules to `device` and, if given, converts them to `dtype`. Runs the
// family's checks, then the decoder's and the tokenizer's own. Throws era::Error(kBundle) naming
// the file, or the field, and the mismatch.
ModelBundle load_bundle(const std::string& dir, const torch::Device& device,
                        std::optional<torch::ScalarType> dtype = std::nullopt, const FamilyChecks& family = {});

// The projector's parameter `name` (e.g. LLaVA-NeXT's image_newline); undefined if it has none.
torch::Tensor projector_parameter(const ModelBundle& bundle, const std::string& name);

}  // namespace era
