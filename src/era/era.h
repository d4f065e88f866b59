#pragma once
// era: LLaVA inference with ERA visual-token reduction, as a C++ library. Version: era/version.h.
//
//   era::Session session = era::Session::open("models/tiny-llava-1.5");
//   era::Request request;
//   request.images = {"photo.jpg"};                          // files, and/or
//   request.image_buffers = {era::Image::from_pixels(rgb, w, h, w * 3, era::PixelFormat::kRGB8)};
//   request.prompt = "What is in the picture?";
//   request.on_text = [](const std::string& piece) { std::cout << piece; return true; };
//   era::Result result = session.generate(request);
//   std::cout << result.text << "\n";
//
// A Session loads a model bundle once (see docs/bundle-format.md) and answers any number of
// requests.
//
// Errors. Every failure is reported as era::Error (era/error.h) carrying an ErrorCode and a
// message naming the item (image path, bundle file, option); the library never exits or aborts,
// and no other exception type leaves a Session call (LibTorch / OpenCV / allocation failures
// become kRuntime). The one exception: whatever an `on_text` callback throws is rethrown
// unchanged after the generation stops. Which call throws which code is listed at each call.
//
// Threads. A Session is thread-safe: any number of threads may call one Session concurrently;
// the calls are serialised internally (one call runs at a time), so each answer
// equals the one the same request gets alone. For throughput run several requests in one call
// with generate_batch() rather than from several threads. Distinct Sessions are independent.
// SessionOptions::num_threads sets LibTorch's process-wide intra-op thread count.
//
// This header needs no LibTorch, OpenCV or other era header beyond era/*.h: an application
// compiles against the installed include folder alone. era/debug.h (optional, needs LibTorch's
// headers) gives the exact tensors the model sees, for parity checks.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "era/error.h"
#include "era/image.h"
#include "era/methods.h"
#include "era/options.h"
#include "era/shim_location.h"
#include "era/version.h"
#include "era/video.h"

namespace era {

struct SessionOptions {
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  std::string dtype;           // "" = the bundle's; or float32 / float16 / bfloat16
  int num_threads = 0;         // intra-op CPU threads; 0 = one per usable CPU (unless OMP_NUM_THREADS is set)
  // How a bfloat16 / float16 model multiplies on the CPU: "auto" widens compute-bound matmuls
  // (vision tower, prefill) to float32 where the CPU has no fast arithmetic in that dtype (bf16:
  // AMX-BF16, or AVX512-BF16 on AMD; fp16: AMX-FP16), and runs decode steps' products on era's
  // own AVX2 / AVX-512 kernel on every AVX2 CPU; "float32" always does both, "native" neither
  // (LibTorch's kernels in the model's dtype).
  std::string cpu_matmul = "auto";
  // TorchScript's graph optimiser: "auto" = off on the CPU (there it only delays the first two
  // requests: it compiles each method on its second call, and no CPU fuser makes the result
  // faster), on for CUDA; "on"; "off". LibTorch's switch is per thread: era sets it around its
  // own calls into the model and leaves the caller's threads as they were.
  std::string jit_optimize = "auto";
  int64_t max_image_pixels = 8192LL * 8192;  // images larger than this are refused before decoding
  // A Hugging Face folder (config.json and *.safetensors, single or sharded) with the weights of
  // the bundle's checkpoint: "" = the bundle's TorchScript modules; else era's own C++ models
  // compute over these weights, read in place (memory-mapped) and converted once to the session's
  // dtype: the decoder, the vision tower and the projector (CLIP, SigLIP, Qwen2.5-VL's native
  // tower and merger). The TorchScript modules they replace are not loaded. Refused
  // unless every tensor has the manifest's shapes.
  std::string hf_weights;
};

// One earlier exchange of a conversation (Request::history).
struct Turn {
  std::string user;       // what the user said; may hold "<image>" placeholders
  std::string assistant;  // the answer given (Result::text of that turn)
};

struct Request {
  std::string prompt;               // the user question; "<image>" marks where images go
  std::vector<std::string> images;  // image files, one per placeholder (prepended if none given)
  // More images, from memory or files (era/image.h), filling the placeholders after `images`:
  // the request's images are `images` followed by `image_buffers`, in that order.
  std::vector<Image> image_buffers;
  // Videos (era/video.h: a file sampled to N frames, or frames given as images), one per "<video>"
  // placeholder in order (prepended after the images' if none is written). Only families that
  // take video (LLaVA-OneVision) accept them; others throw kPrompt.
  std::vector<Video> videos;
  // Qwen2.5-VL: the pixel range images and video frames are resized into (transformers'
  // min_pixels / max_pixels; 0 = the bundle's). Other families ignore them.
  int64_t min_pixels = 0;
  int64_t max_pixels = 0;
  bool use_template = true;  // wrap in the bundle's conversation template (manifest prompt.template)
  // A conversation: the earlier exchanges, oldest first, formatted by the template before
  // `prompt` (the new user turn), as LLaVA's multi-turn conversations are. The request's images
  // fill the "<image>" placeholders of history[0].user, history[1].user, ... and then `prompt`,
  // in order; if no turn has a placeholder, they all go in front of the first user text. Needs
  // use_template. Every turn is prefilled again (no cache is kept between requests).
  std::vector<Turn> history;
  // Replaces the template's system text (e.g. an OpenAI "system" message); unset = the bundle's.
  std::optional<std::string> system;
  int64_t max_new_tokens = 128;
  float temperature = 0.0f;  // 0 = greedy (first index on ties)
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool stop_at_eos = true;
  ReductionRequest reduction;  // era/methods.h
  // Called with each newly completed piece of the answer, on the calling thread; return false to
  // stop generating: no further token is computed (Result::finish_reason "cancelled"). Must not
  // call back into the same Session (calls are serialised: it would wait on itself).
  std::function<bool(const std::string& delta)> on_text;
};

struct Stats {
  double preprocess_ms = 0, vision_ms = 0, reduce_ms = 0, prefill_ms = 0, decode_ms = 0, total_ms = 0;
  std::vector<double> decode_step_ms;      // one per decode step
  int64_t visual_tokens = 0;               // image tokens the decoder saw (fastv/dart: layers >= K)
  int64_t visual_tokens_early_layers = 0;  // image tokens decoder layer 0 saw (differs for fastv/dart)
  int64_t text_tokens = 0;                 // prompt tokens that are text
  int64_t prompt_tokens = 0;               // visual + text
  int64_t generated_tokens = 0;
  int64_t kv_cache_bytes = 0;            // filled part of the KV cache at the end
  int64_t kv_cache_allocated_bytes = 0;  // preallocated for this request
};

// Images and videos are the prompt's visual items, in the order of their placeholders.
enum class MediaKind { kImage, kVideo };

// What the reduction did to one image or video.
struct ImageReduction {
  std::string method;
  MediaKind media = MediaKind::kImage;
  int64_t original_tokens = 0;         // all crops' tokens (576 per crop); a video: its frames'
                                       // pooled tokens (196 per frame on LLaVA-OneVision)
  std::vector<int64_t> kept;           // original index of each token the decoder saw, in sequence
                                       // order (ascending for LLaVA-1.5); -1 for a NeXT newline
  std::vector<int64_t> assignment;     // per original token: slot in `kept` of its cluster, -1 = dropped
  std::vector<int64_t> cluster_sizes;  // per kept token: original tokens it stands for
  std::vector<float> bias;             // per kept token: LAR's b_k (1 = no rectification)
  std::vector<float> entropy;          // per original token: head-distribution entropy (ERA only)
};

struct Result {
  std::string text;             // the answer, special tokens skipped, whitespace stripped
  std::vector<int64_t> tokens;  // generated ids (EOS excluded)
  std::string finish_reason;    // "eos", "length" or "cancelled"
  Stats stats;
  std::vector<ImageReduction> reductions;  // one per image or video, in prompt order
};

// Where the last prompt token's attention goes in every decoder layer, for the reduced run and
// the unreduced ("full") run of the same request: the paper's Attention Logit Collapse and LAR
// verification measurements. Groups: "system" (text before the first image), "visual" (image
// tokens), "instruction" (text after it).
struct LayerAttention {
  std::array<double, 3> share_full{};     // attention mass per group (system, visual, instruction)
  std::array<double, 3> share_reduced{};  // same, reduced run, averaged over heads
  double visual_logit_deviation = 0;      // mean over heads of LSE(visual logits, reduced) - LSE(full)
  double group_kl = 0;                    // mean over heads of KL(full groups || reduced groups)
};
struct AttentionReport {
  std::string method;
  int64_t visual_tokens_full = 0, visual_tokens_reduced = 0;
  std::vector<LayerAttention> layers;
};

// The model inputs of a request before the vision tower, for debugging and pictures (the exact
// normalised pixel tensor: era/debug.h).
struct PreparedInput {
  std::string prompt;              // after the template
  std::vector<int64_t> token_ids;  // BOS + text ids, image_token_id where each image goes,
                                   // video_token_id where each video goes
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;  // -1: the model takes no video
  std::vector<Image> crops;     // every item's crops (a video's frames) in order, RGB pixels
                                // (S x S) as the vision tower sees them before normalisation
  // Per visual item, in prompt order:
  std::vector<MediaKind> media;                     // image or video
  std::vector<int64_t> crops_per_image;             // an image's crops (1 for LLaVA-1.5; 1 +
                                                    // tiles for NeXT), a video's frames
  std::vector<std::array<int64_t, 2>> image_sizes;  // (height, width) of the decoded image or frames
  // Native-resolution families (Qwen2.5-VL), per item: its (t, h, w) grid in patches
  // (transformers' image_grid_thw / video_grid_thw); empty for the others.
  std::vector<std::array<int64_t, 3>> grids;
};

struct ModelInfo {
  std::string name, arch, dtype, device, attention;
  std::string decoder = "torchscript";  // what computes the decoder: "torchscript" (decoder.pt) or "native" (era's C++)
  std::string vision = "torchscript";   // the same for the vision tower and projector
  int64_t visual_tokens_per_image = 0;  // at most, before any reduction (NeXT: largest grid)
  int64_t tokens_per_crop = 0;          // vision tokens of one 336 px crop (576)
  int64_t max_context = 0;
  std::string tokenizer_shim;  // the libera_sentencepiece.so this process loaded
  // Empty, or what slows this process down and how to fix it: where Debian's OpenBLAS does not
  // know this CPU and runs its SSE3 kernels (float32 products ~7x slower), the OPENBLAS_CORETYPE
  // to set before the program starts (era's command-line tools set it themselves); where
  // OpenBLAS's pthread build keeps LibTorch at one thread on several CPUs, its OpenMP build.
  std::string performance_note;
};

// Throws era::Error(kInvalidArgument) naming the field if `request` can never run: a field out
// of range, an unknown reduction method or budget scope, ERA or method options out of range.
// Session::generate makes exactly these checks first, whether or not the request has images;
// batch tools call it once up front so a bad flag stops the run before any work.
void validate_request(const Request& request);
// The same, and what depends on the loaded model: max_new_tokens must be below model.max_context.
// Session::generate makes exactly these checks; batch tools call it once the model is loaded.
void validate_request(const Request& request, const ModelInfo& model);

class Session {
 public:
  // Loads a model: an era bundle folder, or a Hugging Face model folder (config.json and no
  // manifest.json: LLaVA-1.5, LLaVA-NeXT), read as it is and run on era's own C++ models. Throws
  // era::Error: kInvalidArgument (bad device, dtype or num_threads), kBundle (missing/malformed
  // files, a setting era cannot honour, tokenizer or SentencePiece shim unavailable; the message
  // names the file and the field), kRuntime (the modules fail to load or move to the device).
  static Session open(const std::string& model_dir, const SessionOptions& options = {});

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Answers one request. Throws era::Error: kInvalidArgument (a field out of range, unknown
  // reduction method, moved-from Session), kImage (an image missing, corrupt or too large),
  // kPrompt (placeholders do not match the images, or the prompt leaves no room to answer),
  // kRuntime (the model failed: out of memory, device error).
  Result generate(const Request& request);

  // Answers several requests together: one batched prefill and one batched decode step per token
  // (left padding; padded keys masked). Each result equals generate() of that request alone (same
  // tokens; timings are shared). `on_text` is not called. A batch with an in-decoder method
  // (fastv, dart) runs its requests one by one. An error in one request (a bad image)
  // throws for the whole batch: callers that must keep going retry the requests one by one.
  // Throws as generate().
  std::vector<Result> generate_batch(const std::vector<Request>& requests);

  // Preprocessing and tokenisation only (no model run). Throws kInvalidArgument, kImage, kPrompt.
  PreparedInput prepare(const Request& request) const;

  // Prefills the request twice (its reduction method, and "full") and measures every layer's
  // last-query attention; generates nothing. Throws as generate(), and kInvalidArgument for a
  // request without images or with an in-decoder method (fastv, dart).
  AttentionReport attention_report(const Request& request);

  // Never throws except kInvalidArgument on a moved-from Session.
  ModelInfo info() const;

 private:
  struct Impl;                  // the engine (src/pipeline/session_internals.h)
  friend struct SessionAccess;  // the library's own access to it (era/debug.h and the pipeline)
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace era
