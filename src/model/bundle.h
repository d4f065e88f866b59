#pragma once
// A loaded model bundle: manifest, the three TorchScript modules and the tokenizer, checked
// against each other so a wrong or damaged file fails at load time with a clear message rather
// than deep inside a forward pass. Given a Hugging Face folder's weights (load_bundle's hf_weights),
// era's own C++ models replace the modules they stand for, which are then not loaded at all.
#include <torch/script.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/manifest.h"
#include "text/tokenizer.h"

namespace era {

class NativeDecoder;  // model/native_decoder.h
class VisionBackend;  // model/vision_backend.h

struct ModelBundle {
  std::string dir;
  Manifest manifest;
  // The TorchScript modules; vision and projector are left unloaded where native_vision replaces
  // them, decoder where native_decoder does (scripted_modules() lists the loaded ones).
  torch::jit::Module vision;
  torch::jit::Module projector;
  torch::jit::Module decoder;
  std::unique_ptr<Tokenizer> tokenizer;
  // era's own C++ decoder over a Hugging Face folder's weights, where the session was asked for
  // one (SessionOptions::hf_weights): it then computes every decoder call instead of decoder.pt
  // (model/decoder.h).
  std::shared_ptr<NativeDecoder> native_decoder;
  // The same for the vision tower and projector, where the family has them natively
  // (family/llava_native_vision.h; model/vision_encoder.h).
  std::shared_ptr<VisionBackend> native_vision;
  // The TorchScript modules loaded (those not replaced by native models).
  std::vector<torch::jit::Module*> scripted_modules();
  bool scripted_vision = false, scripted_decoder = false;  // which of them load_bundle loaded
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

// The family's vision tower and projector as era's own models over a Hugging Face folder's
// weights (hf_dir, the manifest, device, dtype); throws era::Error(kBundle) naming the file and the
// tensor.
using NativeVisionLoader =
    std::function<std::shared_ptr<VisionBackend>(const std::string&, const Manifest&, const torch::Device&, torch::ScalarType)>;

// What a bundle's family does at load (family/model_family.h): reads its own manifest sections
// (check_family_sections) before any module is opened, checks its modules as loaded
// (check_family_modules), and loads its tower natively where it has one (empty: the tower stays
// TorchScript even with a Hugging Face folder's weights). Any may be empty.
struct FamilyChecks {
  std::function<void(const Manifest&)> sections = {};
  ModuleChecks modules = {};
  NativeVisionLoader native_vision = {};
  // The manifest document of a Hugging Face folder (family/model_family.h, manifest_from_hf_folder);
  // empty: only bundles load.
  std::function<nlohmann::json(const std::string&)> hf_manifest = {};
};

// Loads DIR, moves the modules to `device` and, if given, converts them to `dtype`. Runs the
// family's checks, then the decoder's and the tokenizer's own. DIR may also be a Hugging Face
// folder (model/hf_folder.h, is_hf_folder): its manifest is then built by family.hf_manifest and
// its weights are the native models' (as `hf_weights` = DIR). With `hf_weights` (a Hugging Face
// folder of the model the bundle was exported from, model/safetensors.h), era's native decoder and
// (family.native_vision) tower and projector are built from its weights and the modules they
// replace are not loaded. Throws era::Error(kBundle) naming the file, or the field, and the mismatch.
ModelBundle load_bundle(const std::string& dir, const torch::Device& device,
                        std::optional<torch::ScalarType> dtype = std::nullopt, const FamilyChecks& family = {},
                        const std::string& hf_weights = "");

// Bytes of the model's weights as held: the loaded TorchScript modules' parameters and buffers and
// the native models' tensors, each storage once (a tied head counts once).
int64_t model_weight_bytes(ModelBundle& bundle);

// The projector's parameter `name` (e.g. LLaVA-NeXT's image_newline); undefined if it has none.
torch::Tensor projector_parameter(const ModelBundle& bundle, const std::string& name);

}  // namespace era
