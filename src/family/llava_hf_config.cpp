#include "family/llava_hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "era/error.h"
#include "model/hf_config.h"
#include "model/manifest_fields.h"

namespace era {
namespace {

using json = nlohmann::json;

const std::vector<double> kClipMean{0.48145466, 0.4578275, 0.40821073};
const std::vector<double> kClipStd{0.26862954, 0.26130258, 0.27577711};

// CLIPVisionConfig's defaults, and the CLIP-L/14-336 LlavaConfig builds without a vision_config.
const json& clip_defaults() {
  static const json d = {{"hidden_size", 768},        {"intermediate_size", 3072},  {"num_hidden_layers", 12},
                         {"num_attention_heads", 12}, {"num_channels", 3},          {"image_size", 224},
                         {"patch_size", 32},          {"hidden_act", "quick_gelu"}, {"layer_norm_eps", 1e-5}};
  return d;
}
json llava_default_vision() {
  json d = clip_defaults();
  d.update({{"hidden_size", 1024},
            {"intermediate_size", 4096},
            {"num_hidden_layers", 24},
            {"num_attention_heads", 16},
            {"image_size", 336},
            {"patch_size", 14}});
  return d;
}

// transformers' LlavaNextConfig default pinpoints.
const json kNextPinpoints = json::array({{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}});

json config_pinpoints(const json& value, int64_t tile, const std::string& where) {
  bool ok = value.is_array() && !value.empty();
  json out = json::array();
  for (const json& pair : ok ? value : json::array()) {
    ok = pair.is_array() && pair.size() == 2 && json_is_integer(pair[0]) && json_is_integer(pair[1]) &&
         pair[0].get<int64_t>() > 0 && pair[1].get<int64_t>() > 0;
    if (!ok) break;
    if (pair[0].get<int64_t>() % tile || pair[1].get<int64_t>() % tile)
      refuse_config(where, shown_json(pair) + " is not a multiple of the vision image_size " + std::to_string(tile));
    out.push_back({pair[0].get<int64_t>(), pair[1].get<int64_t>()});
  }
  if (!ok)
    refuse_config(where, "must be a non-empty list of [height, width] pairs of positive integers, got " + shown_json(value));
  return out;
}

// The image processor's settings and the path for messages; null without either file.
std::pair<json, std::string> read_image_processor(const std::string& dir) {
  std::error_code ec;
  const std::string pre = dir + "/preprocessor_config.json";
  if (std::filesystem::exists(pre, ec)) return {read_json_file(pre, "preprocessor_config.json", true), pre};
  const std::string proc = dir + "/processor_config.json";
  const json pc = read_json_file(proc, "processor_config.json", false);
  if (!pc.contains("image_processor")) return {json(), proc};
  if (!pc["image_processor"].is_object()) refuse_config(proc, "image_processor is not a JSON object");
  return {pc["image_processor"], proc + " (image_processor)"};
}

// The "image" section from the processor's settings (transformers' PIL-backend CLIPImageProcessor,
// LlavaImageProcessor, LlavaNextImageProcessor): [pad to square in the mean colour] -> resize the
// shortest edge -> centre crop -> rescale -> normalise; NeXT cuts anyres tiles of the same steps.
json image_section(const std::string& dir, int64_t image_size, const std::string& arch, const json& config_pins) {
  const bool next = arch == "llava-next";
  const auto [pc, path] = read_image_processor(dir);
  json image = {{"aspect_ratio", next ? "anyres" : "pad"},
                {"size", image_size},
                {"shortest_edge", image_size},
                {"resample", "bicubic"},
                {"mean", kClipMean},
                {"std", kClipStd}};
  if (!pc.is_null()) {
    std::string type = pc.contains("image_processor_type") && pc["image_processor_type"].is_string()
                           ? pc["image_processor_type"].get<std::string>()
                       : next ? "LlavaNextImageProcessor"
                              : "CLIPImageProcessor";
    const std::string given = type;
    if (type.size() > 4 && type.compare(type.size() - 4, 4, "Fast") == 0) type.resize(type.size() - 4);
    const std::map<std::string, std::string> arch_of = {
        {"CLIPImageProcessor", "llava-1.5"}, {"LlavaImageProcessor", "llava-1.5"}, {"LlavaNextImageProcessor", "llava-next"}};
    if (!arch_of.count(type))
      refuse_config(path, "image_processor_type = \"" + given +
                              "\": not supported (CLIPImageProcessor, LlavaImageProcessor, "
                              "LlavaNextImageProcessor)");
    if (arch_of.at(type) != arch)
      refuse_config(path, "image_processor_type = \"" + given + "\": does not fit a " + arch + " checkpoint");
    // settings that never change pixel values, and the ones read below; any other may: refused
    std::set<std::string> known = {"image_processor_type",
                                   "processor_class",
                                   "feature_extractor_type",
                                   "_processor_class",
                                   "aspect_ratio_setting",
                                   "return_tensors",
                                   "device",
                                   "disable_grouping",
                                   "image_seq_length",
                                   "do_resize",
                                   "do_center_crop",
                                   "do_rescale",
                                   "do_normalize",
                                   "do_convert_rgb",
                                   "image_mean",
                                   "image_std",
                                   "crop_size",
                                   "size",
                                   "resample",
                                   "rescale_factor",
                                   "do_pad"};
    if (next) known.insert("image_grid_pinpoints");
    std::string unknown;
    for (const auto& [k, v] : pc.items())
      if (!known.count(k)) unknown += (unknown.empty() ? "" : ", ") + k;
    if (!unknown.empty())
      refuse_config(path, "setting(s) " + unknown +
                              " not supported by era's image preprocessing (they may change the pixels); "
                              "remove them if they do not");
    for (const char* key : {"do_resize", "do_center_crop", "do_rescale", "do_normalize", "do_convert_rgb"})
      if (pc.contains(key) && pc[key] != json(true))
        refuse_config(path,
                      std::string(key) + " = " + shown_json(pc[key]) + ": not supported (era always does " + key + ": true)");
    if (pc.contains("rescale_factor")) {
      const json& f = pc["rescale_factor"];
      if (!f.is_number() || std::abs(f.get<double>() - 1.0 / 255) > 1e-12)
        refuse_config(path, "rescale_factor = " + shown_json(f) + ": not supported (only 1/255)");
    }
    for (const char* key : {"image_mean", "image_std"}) {
      if (!pc.contains(key)) continue;
      const json& v = pc[key];
      const bool three =
          v.is_array() && v.size() == 3 && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); });
      if (!three) refuse_config(path, std::string(key) + " = " + shown_json(v) + ": must be a list of 3 numbers");
      std::vector<double> values;
      for (const json& x : v) values.push_back(x.get<double>());
      if (std::string(key) == "image_std" && std::any_of(values.begin(), values.end(), [](double x) { return x <= 0; }))
        refuse_config(path, "image_std = " + shown_json(v) + ": must be positive");
      image[std::string(key) == "image_mean" ? "mean" : "std"] = values;
    }
    json crop = pc.value("crop_size", json(image_size));
    if (crop.is_object()) {
      if (crop.size() != 2 || !crop.contains("height") || !crop.contains("width"))
        refuse_config(path, "crop_size = " + shown_json(crop) + ": not supported (height and width)");
      if (crop["height"] != crop["width"])
        refuse_config(path, "crop_size = " + shown_json(crop) + ": not square (era crops squares)");
      crop = crop["height"];
    }
    if (!json_is_integer(crop) || crop.get<int64_t>() <= 0)
      refuse_config(path, "crop_size = " + shown_json(crop) + ": must be a positive integer");
    if (crop.get<int64_t>() != image_size)
      refuse_config(
          path, "crop_size = " + shown_json(crop) + ": differs from the vision tower's image_size " + std::to_string(image_size));
    json size = pc.value("size", json{{"shortest_edge", crop}});
    if (size.is_object()) {
      if (size.size() != 1 || !size.contains("shortest_edge"))
        refuse_config(path, "size = " + shown_json(size) + ": not supported (only {\"shortest_edge\": N})");
      size = size["shortest_edge"];
    }
    if (!json_is_integer(size) || size.get<int64_t>() <= 0)
      refuse_config(path, "size.shortest_edge = " + shown_json(size) + ": must be a positive integer");
    image["shortest_edge"] = size.get<int64_t>();
    const json resample = pc.value("resample", json(3));
    const std::map<int64_t, std::string> filters = {{1, "lanczos"}, {2, "bilinear"}, {3, "bicubic"}, {4, "box"}, {5, "hamming"}};
    if (!json_is_integer(resample) || !filters.count(resample.get<int64_t>()))
      refuse_config(path, "resample = " + shown_json(resample) +
                              ": not supported (era's Pillow-exact resize does 1 (lanczos), "
                              "2 (bilinear), 3 (bicubic), 4 (box), 5 (hamming))");
    image["resample"] = filters.at(resample.get<int64_t>());
    const json pad = pc.value("do_pad", json(next));
    if (!pad.is_boolean()) refuse_config(path, "do_pad = " + shown_json(pad) + ": must be true or false");
    if (next) {
      // the processor lays the crops out with its own pinpoints, the model unpacks them with
      // config.json's: they must be the same list
      if (pc.contains("image_grid_pinpoints") &&
          config_pinpoints(pc["image_grid_pinpoints"], image_size, path + ": image_grid_pinpoints") != config_pins)
        refuse_config(path, "image_grid_pinpoints = " + shown_json(pc["image_grid_pinpoints"]) + ": differ from config.json's " +
                                shown_json(config_pins));
      image["aspect_ratio"] = "anyres";
    } else {
      // LlavaImageProcessor pads to a square before the resize; CLIPImageProcessor's do_pad pads a
      // batch after the crop, which changes no image
      image["aspect_ratio"] = type == "LlavaImageProcessor" && pad.get<bool>() ? "pad" : "crop";
    }
  }
  json colour = json::array();
  for (const json& m : image["mean"]) colour.push_back(static_cast<int>(m.get<double>() * 255));
  image["pad_color"] = colour;  // LLaVA's expand2square colour
  if (next) image["grid_pinpoints"] = config_pins;
  return image;
}

std::string checkpoint_dtype(const json& config) {
  for (const json* section : {&config, config.contains("text_config") ? &config["text_config"] : nullptr})
    for (const char* key : {"dtype", "torch_dtype"})
      if (section && section->is_object() && section->contains(key) && (*section)[key].is_string()) {
        const std::string d = (*section)[key].get<std::string>();
        if (d == "float32" || d == "float16" || d == "bfloat16") return d;
      }
  return "float32";
}

}  // namespace

json llava_manifest_from_hf(const std::string& dir, const json& config, const std::string& arch) {
  const std::string path = dir + "/config.json";
  const bool next = arch == "llava-next";
  json m;
  m["text"] = hf_text_section(config, path, "llama");
  const json& text = m["text"];

  // ---- the CLIP tower
  const json raw_vision =
      config.contains("vision_config") && config["vision_config"].is_object() ? config["vision_config"] : json();
  const std::string vtype = raw_vision.is_object() ? raw_vision.value("model_type", std::string("clip_vision_model"))
                                                   : std::string("clip_vision_model");
  if (vtype != "clip_vision_model")
    refuse_config(path, "vision_config.model_type = \"" + vtype + "\": not supported for " + arch + " (clip_vision_model)");
  const json vc = raw_vision.is_object() ? with_defaults(raw_vision, clip_defaults()) : llava_default_vision();
  const std::string vwhere = path + ": vision_config";
  if (vc.value("hidden_act", json()) != json("quick_gelu"))
    refuse_config(vwhere, "hidden_act = " + shown_json(vc.value("hidden_act", json())) +
                              ": not supported (quick_gelu for clip_vision_model)");
  const int64_t C = positive_integer(vc, "hidden_size", vwhere), heads = positive_integer(vc, "num_attention_heads", vwhere);
  const int64_t layers = positive_integer(vc, "num_hidden_layers", vwhere), S = positive_integer(vc, "image_size", vwhere);
  const int64_t P = positive_integer(vc, "patch_size", vwhere);
  if (positive_integer(vc, "num_channels", vwhere) != 3)
    refuse_config(vwhere, "num_channels = " + shown_json(vc["num_channels"]) + ": not supported (3)");
  if (C % heads) refuse_config(vwhere, "hidden_size not divisible by num_attention_heads");
  if (S % P) refuse_config(vwhere, "image_size not divisible by patch_size");
  // transformers' semantics: an int k selects hidden_states[k]; a list selects each and concatenates
  // them; index 0 is the embeddings, k the output of layer k-1, negative k from the end
  const json feature = config.value("vision_feature_layer", json(-2));
  std::vector<int64_t> feature_layers;
  if (json_is_integer(feature)) feature_layers = {feature.get<int64_t>()};
  else if (feature.is_array() && !feature.empty() && std::all_of(feature.begin(), feature.end(), json_is_integer))
    for (const json& k : feature) feature_layers.push_back(k.get<int64_t>());
  else
    refuse_config(path, "vision_feature_layer = " + shown_json(feature) + ": must be an integer or a non-empty list of integers");
  std::vector<int64_t> indices;
  for (const int64_t k : feature_layers) {
    const int64_t index = k < 0 ? layers + 1 + k : k;
    if (index < 1 || index > layers)
      refuse_config(path, "vision_feature_layer = " + shown_json(feature) + ": out of range for " + std::to_string(layers) +
                              " layers (1.." + std::to_string(layers) + " or -" + std::to_string(layers) + "..-1)");
    indices.push_back(index);
  }
  const int64_t layers_run = *std::max_element(indices.begin(), indices.end());
  const std::string strategy = config.value("vision_feature_select_strategy", std::string("default"));
  if (strategy != "default" && strategy != "full")
    refuse_config(path, "vision_feature_select_strategy = \"" + strategy + "\": not supported (default or full)");
  if (next && strategy == "full")
    refuse_config(path,
                  "vision_feature_select_strategy = \"full\": not supported for llava_next (transformers' anyres packing "
                  "needs exactly one token per patch)");
  const int64_t patches = (S / P) * (S / P);
  m["vision"] = {{"image_size", S},
                 {"patch_size", P},
                 {"num_patches", patches},
                 {"hidden_size", C},
                 {"num_heads", heads},
                 {"num_layers", layers},
                 {"intermediate_size", positive_integer(vc, "intermediate_size", vwhere)},
                 // the deepest selected layer (where saliency comes from), as a negative index for a list
                 {"feature_layer", json_is_integer(feature) ? feature.get<int64_t>() : layers_run - layers - 1},
                 {"feature_layers", feature_layers},
                 {"has_cls", true},
                 {"layers_run", layers_run},
                 {"select_strategy", strategy},
                 {"tokens_per_crop", patches + (strategy == "full" ? 1 : 0)}};

  // ---- projector and placeholder
  const json act = config.value("projector_hidden_act", json("gelu"));
  if (act != json("gelu")) refuse_config(path, "projector_hidden_act = " + shown_json(act) + ": not supported (gelu)");
  m["projector"] = {
      {"in_features", C * static_cast<int64_t>(indices.size())}, {"out_features", text["hidden_size"]}, {"act", "gelu"}};
  const int64_t vocab = text["vocab_size"].get<int64_t>();
  const json image_token =
      config.contains("image_token_index") ? config["image_token_index"] : config.value("image_token_id", json(32000));
  if (!json_is_integer(image_token) || image_token.get<int64_t>() < 0 || image_token.get<int64_t>() >= vocab)
    refuse_config(path, "image_token_index = " + shown_json(image_token) + ": outside the vocabulary (vocab_size " +
                            std::to_string(vocab) + ")");
  json pad = config.contains("pad_token_id") ? config["pad_token_id"]
             : config.contains("text_config") && config["text_config"].is_object()
                 ? config["text_config"].value("pad_token_id", json())
                 : json();
  if (!pad.is_null() && !json_is_integer(pad))
    refuse_config(path, "pad_token_id = " + shown_json(pad) + ": must be an integer or null");
  const json pins =
      next ? config_pinpoints(config.value("image_grid_pinpoints", kNextPinpoints), S, path + ": image_grid_pinpoints") : json();
  m["image"] = image_section(dir, S, arch, pins);

  // ---- tokenizer, prompt, header
  const std::string text_type = text["model_type"].get<std::string>();
  const HfTokenizer tokenizer = read_hf_tokenizer(dir, text_type, vocab);
  set_tokens_and_prompt(m, dir, tokenizer, default_template_name(tokenizer, text_type), image_token.get<int64_t>(),
                        pad.is_null() ? -1 : pad.get<int64_t>());
  m["format"] = "era-bundle";
  m["format_version"] = 1;
  m["arch"] = arch;
  m["model_name"] = std::filesystem::path(dir).filename().string();
  m["dtype"] = checkpoint_dtype(config);
  return m;
}

}  // namespace era
