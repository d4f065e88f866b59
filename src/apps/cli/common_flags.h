#pragma once
// The flags era_infer and era_eval share (model, generation, reduction), and how they become the
// library's SessionOptions and Request. Header-only: the command-line tools are thin.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "era/era.h"

namespace era::cli {

struct ModelFlags {
  std::string model;
  std::string device = "cpu";
  std::string dtype;
  int threads = 0;
  std::string cpu_matmul = "auto";
  std::string jit_optimize = "auto";
  int64_t max_image_pixels = 8192LL * 8192;
  std::string hf_weights;
};

struct GenerationFlags {
  int64_t max_new_tokens = 128;
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string method = kUnreducedMethod;
  int64_t tokens = 0;
  float keep_ratio = 0.0f;
  std::string scope = "crop";
  std::string positions = "original";
  int64_t min_pixels = 0, max_pixels = 0;
  std::string era_config;
  std::vector<std::string> era_set;
  std::vector<std::string> method_set;
};

// The documented bounds of the flags (docs/cli.md, "Flag bounds"): a value outside is a parse error,
// exit 2 with one line naming the flag, before anything is loaded.
inline constexpr int kMaxThreads = 1024;  // LibTorch starts one OS thread each
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 31;
inline constexpr int64_t kMaxNewTokens = int64_t{1} << 24;  // also below the model's context (checked on load)
inline constexpr int64_t kMaxTokens = int64_t{1} << 20;

// A finite number in [lo, hi] (or (lo, hi] when `open_low`): CLI::Range lets NaN through.
inline CLI::Validator finite_in(double lo, double hi, bool open_low = false) {
  const std::string rule = std::string("a finite number in ") + (open_low ? "(" : "[") + CLI::detail::to_string(lo) + ", " +
                           CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || text.empty() || !std::isfinite(v) || v < lo || v > hi || (open_low && v <= lo))
          return "must be " + rule + ", got " + text;
        return std::string();
      },
      rule);
}

inline void add_model_flags(CLI::App& app, ModelFlags& f) {
  app.add_option("-m,--model", f.model,
                 "a Hugging Face model folder (config.json, *.safetensors, tokenizer and processor files) or an era "
                 "bundle folder (made by tools/export_llava.py)");
  app.add_option("--device", f.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", f.dtype, "run in float32, float16 or bfloat16 (default: the bundle's)");
  app.add_option("--threads", f.threads, "CPU threads (0 = one per usable CPU, or OMP_NUM_THREADS)")
      ->check(CLI::Range(0, kMaxThreads))
      ->capture_default_str();
  app.add_option(
         "--cpu-matmul", f.cpu_matmul,
         "bfloat16/float16 models on the CPU: 'auto' = compute-bound matmuls (vision, prefill) in float32 "
         "where the CPU has no AMX-BF16/AMX-FP16 (nor, on AMD, AVX512-BF16; with them: the vision tower's bf16 "
         "weights packed for oneDNN), decode steps on era's AVX2/AVX-512 kernel; 'float32' = always widen; 'native' = LibTorch's "
         "kernels as they are")
      ->check(CLI::IsMember({"auto", "float32", "native"}))
      ->capture_default_str();
  app.add_option("--jit-optimize", f.jit_optimize,
                 "TorchScript's graph optimiser: 'auto' = off on the CPU (it slows the first two requests and speeds "
                 "up none), on for CUDA; 'on'; 'off'")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--hf-weights", f.hf_weights,
                 "a Hugging Face folder with the bundle's checkpoint (config.json, *.safetensors): era's own C++ "
                 "models (decoder, vision tower, projector) run over its weights instead of the bundle's TorchScript "
                 "modules, which are then not loaded");
  app.add_option("--max-image-pixels", f.max_image_pixels, "refuse larger images before decoding")
      ->check(CLI::Range(int64_t{1}, kMaxImagePixels))
      ->capture_default_str();
}

// The --method help, from the method registry: every method with its one-line summary.
inline std::string methods_help(const std::string& lead) {
  std::string text = lead;
  for (const MethodInfo& m : available_methods()) {
    text += "\n  " + m.name + std::string(m.name.size() < 12 ? 12 - m.name.size() : 1, ' ') + m.summary;
    if (!m.options.empty()) {
      text += " (--method-set";
      for (const auto& o : m.options) text += " " + o;
      text += ")";
    }
  }
  return text;
}

// --video-fps, the same in every tool that takes videos; it excludes the tool's own --frames.
inline CLI::Option* add_video_fps_flag(CLI::App& app, double& fps, CLI::Option* frames) {
  return app
      .add_option("--video-fps", fps,
                  "sample each video file at this many frames per second of its time (transformers' fps sampling; "
                  "Qwen2.5-VL: 4..768 frames, whole temporal patches; sets the M-RoPE time step); with a folder, the "
                  "rate its frames were taken at; excludes --frames")
      ->check(finite_in(0.001, 1000.0))
      ->excludes(frames);
}

inline void add_generation_flags(CLI::App& app, GenerationFlags& f) {
  app.add_option("-n,--max-new-tokens", f.max_new_tokens, "maximum answer length in tokens (below the model's context)")
      ->check(CLI::Range(int64_t{0}, kMaxNewTokens))
      ->capture_default_str();
  app.add_option("--temp", f.temperature, "sampling temperature; 0 = greedy")->check(finite_in(0, 100))->capture_default_str();
  app.add_option("--top-p", f.top_p, "nucleus sampling mass")->check(finite_in(0, 1, true))->capture_default_str();
  app.add_option("--seed", f.seed, "sampling seed")->capture_default_str();
  app.add_flag("--ignore-eos", f.ignore_eos, "keep generating past EOS up to --max-new-tokens");
  app.add_option("--method", f.method, methods_help("visual-token reduction (docs/methods.md):"))->capture_default_str();
  app.add_option("--tokens", f.tokens, "visual tokens to keep per image (e.g. 64; LLaVA-NeXT: nominal, 160 = 32 per crop)")
      ->check(CLI::Range(int64_t{0}, kMaxTokens));
  app.add_option("--keep-ratio", f.keep_ratio, "fraction of visual tokens to keep per image, when --tokens is not given")
      ->check(finite_in(0, 1));
  app.add_option("--budget-scope", f.scope,
                 "LLaVA-NeXT: 'crop' = --tokens is nominal (160 = 32 per crop x 5), selected per crop before unpad; "
                 "'image' = one selection of --tokens over all crops")
      ->capture_default_str();
  app.add_option("--positions", f.positions,
                 "Qwen2.5-VL: M-RoPE positions of reduced visual tokens: 'original' = each kept token keeps its (t, h, w) "
                 "position; 'compact' = consecutive, like text")
      ->capture_default_str();
  app.add_option("--min-pixels", f.min_pixels, "Qwen2.5-VL: least pixels an image or frame is resized to (default: the bundle's)")
      ->check(CLI::Range(int64_t{1}, kMaxImagePixels));
  app.add_option("--max-pixels", f.max_pixels, "Qwen2.5-VL: most pixels an image or frame is resized to (default: the bundle's)")
      ->check(CLI::Range(int64_t{1}, kMaxImagePixels));
  app.add_option("--era-config", f.era_config, "ERA options file (see configs/era.json)");
  app.add_option("--era-set", f.era_set, "set one ERA option, key=value (e.g. alpha=0.3, lar_schedule=early); repeatable");
  app.add_option("--method-set", f.method_set,
                 "set one competing-method option, key=value (e.g. fastv_layer=3, dart_exact_budget=true, random_seed=7); "
                 "repeatable");
}

inline SessionOptions session_options(const ModelFlags& f) {
  SessionOptions so;
  so.device = f.device;
  so.dtype = f.dtype;
  so.num_threads = f.threads;
  so.cpu_matmul = f.cpu_matmul;
  so.jit_optimize = f.jit_optimize;
  so.max_image_pixels = f.max_image_pixels;
  so.hf_weights = f.hf_weights;
  return so;
}

// Applies repeatable "key=value" flags with `set`; an error names the flag in front of the
// library's message, which names the value ("--era-set: ERA option gamma=2: unknown option ...").
template <typename Options, typename Setter>
void apply_key_values(const char* flag, const std::vector<std::string>& values, Options& options, Setter set) {
  for (const auto& kv : values) {
    try {
      set(options, kv);
    } catch (const Error& e) {
      throw Error(e.code(), std::string(flag) + ": " + e.what());
    }
  }
}

// A request with everything but the prompt and images; reads --era-config (throws era::Error).
inline Request base_request(const GenerationFlags& f) {
  Request req;
  req.max_new_tokens = f.max_new_tokens;
  req.temperature = f.temperature;
  req.top_p = f.top_p;
  req.seed = f.seed;
  req.stop_at_eos = !f.ignore_eos;
  req.reduction.method = f.method;
  req.reduction.tokens = f.tokens;
  req.reduction.keep_ratio = f.keep_ratio;
  req.reduction.scope = f.scope;
  req.reduction.positions = f.positions;
  req.min_pixels = f.min_pixels;
  req.max_pixels = f.max_pixels;
  if (!f.era_config.empty()) req.reduction.era = load_era_options(f.era_config, req.reduction.era);
  apply_key_values("--era-set", f.era_set, req.reduction.era, set_era_option);
  apply_key_values("--method-set", f.method_set, req.reduction.baselines, set_baseline_option);
  return req;
}

// era::validate_request for a request made from flags, the errors a flag causes naming the flag:
// the library's messages name Request fields (max_new_tokens, min_pixels), which a command-line
// user never typed. With `model`, also the limits that depend on it (-n below its context).
inline void validate_flags(const Request& req, const ModelInfo* model = nullptr) {
  if (req.min_pixels > 0 && req.max_pixels > 0 && req.min_pixels > req.max_pixels) {
    throw Error(ErrorCode::kInvalidArgument, "--min-pixels " + std::to_string(req.min_pixels) + " is above --max-pixels " +
                                                 std::to_string(req.max_pixels) +
                                                 " (the pair: the least pixels must not exceed the most)");
  }
  if (model && req.max_new_tokens >= model->max_context) {
    throw Error(ErrorCode::kInvalidArgument, "-n/--max-new-tokens " + std::to_string(req.max_new_tokens) +
                                                 " is not below the model's context of " + std::to_string(model->max_context) +
                                                 " tokens");
  }
  if (model) {
    validate_request(req, *model);
  } else {
    validate_request(req);
  }
}

}  // namespace era::cli
