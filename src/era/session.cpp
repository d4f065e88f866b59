// Session: the pipeline's stages in order —
//   image -> preprocess -> vision tower + projector -> reduce -> sequence -> decoder -> sampler.
#include <ATen/Parallel.h>

#include <chrono>

#include "era/era.h"
#include "era/session_impl.h"
#include "image/clip_preprocess.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "text/prompt.h"
#include "util/compat.h"

namespace era {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

torch::Device parse_device(const std::string& name) {
  try {
    torch::Device device(name);
    if (device.is_cuda() && !compat::cuda_available()) {
      throw Error(ErrorCode::kInvalidArgument, "device '" + name + "' requested but this LibTorch build has no usable CUDA device");
    }
    return device;
  } catch (const c10::Error&) {
    throw Error(ErrorCode::kInvalidArgument, "unknown device '" + name + "' (use cpu, cuda or cuda:N)");
  }
}

void check_request(const Request& r) {
  if (r.max_new_tokens < 0) throw Error(ErrorCode::kInvalidArgument, "max_new_tokens must be >= 0");
  if (!(r.temperature >= 0.0f)) throw Error(ErrorCode::kInvalidArgument, "temperature must be >= 0");
  if (!(r.top_p > 0.0f && r.top_p <= 1.0f)) throw Error(ErrorCode::kInvalidArgument, "top-p must be in (0, 1]");
}

ClipImageConfig clip_config(const Manifest& m) {
  ClipImageConfig c;
  c.size = static_cast<int>(m.image.size);
  c.mean = m.image.mean;
  c.std = m.image.std;
  c.pad_color = m.image.pad_color;
  return c;
}

}  // namespace

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Session Session::open(const std::string& bundle_dir, const SessionOptions& options) {
  if (options.num_threads < 0) throw Error(ErrorCode::kInvalidArgument, "num_threads must be >= 0");
  if (options.num_threads > 0) at::set_num_threads(options.num_threads);
  const auto device = parse_device(options.device);
  std::optional<torch::ScalarType> dtype;
  if (!options.dtype.empty()) dtype = parse_dtype(options.dtype);

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->image_limits.max_pixels = options.max_image_pixels;
  impl->bundle = load_bundle(bundle_dir, device, dtype);
  impl->vision = std::make_unique<VisionEncoder>(impl->bundle);
  impl->decoder = std::make_unique<Decoder>(impl->bundle);
  impl->reducer = make_reducer(ReductionOptions{});
  return Session(std::move(impl));
}

PreparedInput Session::prepare(const Request& request) const {
  const auto& m = impl_->bundle.manifest;
  PreparedInput in;
  const int n_images = static_cast<int>(request.images.size());
  if (request.use_template) {
    in.prompt = format_prompt(m.prompt, request.prompt, n_images);
  } else {
    in.prompt = request.prompt;
    const int found = count_placeholders(in.prompt, m.prompt.image_placeholder);
    if (found != n_images) {
      throw Error(ErrorCode::kPrompt, "the prompt has " + std::to_string(found) + " " + m.prompt.image_placeholder +
                                          " placeholder(s) but " + std::to_string(n_images) + " image(s) were given");
    }
  }
  in.image_token_id = m.tokens.image_token_id;
  in.token_ids = tokenize_with_images(*impl_->bundle.tokenizer, in.prompt, m.prompt.image_placeholder, in.image_token_id);

  // Fail before any image work when the text alone cannot fit.
  const int64_t text_tokens = static_cast<int64_t>(in.token_ids.size()) - n_images;
  const int64_t full_length = text_tokens + n_images * m.vision.num_patches;
  if (full_length >= impl_->max_context()) {
    throw Error(ErrorCode::kPrompt, "prompt too long: " + std::to_string(text_tokens) + " text tokens + " +
                                        std::to_string(n_images * m.vision.num_patches) + " image tokens = " +
                                        std::to_string(full_length) + ", but the model's context is " +
                                        std::to_string(impl_->max_context()) + " tokens (one must be left to answer)");
  }

  const auto config = clip_config(m);
  std::vector<torch::Tensor> pixels;
  for (const auto& path : request.images) {
    pixels.push_back(preprocess_llava_pad(load_rgb_image(path, impl_->image_limits), config));
  }
  in.pixel_values = pixels.empty() ? torch::empty({0, 3, m.image.size, m.image.size}) : torch::stack(pixels);
  return in;
}

Result Session::generate(const Request& request) {
  check_request(request);
  c10::InferenceMode inference;
  Result result;
  auto& st = result.stats;
  const auto t_start = Clock::now();

  auto t0 = Clock::now();
  const PreparedInput in = prepare(request);
  st.preprocess_ms = ms_since(t0);

  try {
    std::vector<ReducedTokens> images;
    if (in.pixel_values.size(0) > 0) {
      t0 = Clock::now();
      const VisionOutput vision = impl_->vision->encode(in.pixel_values);
      st.vision_ms = ms_since(t0);
      t0 = Clock::now();
      for (int64_t i = 0; i < in.pixel_values.size(0); ++i) {
        ReductionInput input;
        input.embeddings = vision.embeddings[i];
        input.features = vision.features[i];
        input.cls_logits = vision.attn_logits[i];
        input.cls_probs = vision.attn_probs[i];
        images.push_back(impl_->reducer->reduce(input));
      }
      st.reduce_ms = ms_since(t0);
    }
    const PromptSequence seq = build_sequence(*impl_->decoder, in.token_ids, in.image_token_id, images);
    st.visual_tokens = seq.visual_tokens();
    st.text_tokens = seq.text_tokens();
    st.prompt_tokens = seq.length();

    const int64_t room = impl_->max_context() - seq.length();
    GenerationLimits limits;
    limits.max_new_tokens = std::min<int64_t>(request.max_new_tokens, room);
    limits.stop_at_eos = request.stop_at_eos;
    // The last sampled token is never fed back, so max_new_tokens - 1 decode slots suffice.
    KvCache cache = impl_->decoder->make_cache(1, seq.length() + std::max<int64_t>(limits.max_new_tokens - 1, 0));
    Sampler sampler({request.temperature, request.top_p, request.seed});
    Generator generator(*impl_->decoder, *impl_->bundle.tokenizer, impl_->bundle.manifest.tokens.eos_id);
    GenerationOutput out = generator.run(seq, limits, sampler, cache, request.on_text);

    result.tokens = std::move(out.tokens);
    result.finish_reason = out.finish_reason;
    const auto first = out.text.find_first_not_of(" \t\n\r\f\v");
    const auto last = out.text.find_last_not_of(" \t\n\r\f\v");
    result.text = first == std::string::npos ? "" : out.text.substr(first, last - first + 1);
    st.prefill_ms = out.prefill_ms;
    st.decode_step_ms = std::move(out.decode_ms);
    for (double ms : st.decode_step_ms) st.decode_ms += ms;
    st.generated_tokens = static_cast<int64_t>(result.tokens.size());
    st.kv_cache_bytes = cache.bytes_used();
    st.kv_cache_allocated_bytes = cache.bytes_allocated();
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    throw Error(ErrorCode::kRuntime, "model failed: " + what.substr(0, what.find('\n')));
  }
  st.total_ms = ms_since(t_start);
  return result;
}

ModelInfo Session::info() const {
  const auto& b = impl_->bundle;
  ModelInfo i;
  i.name = b.manifest.model_name;
  i.arch = b.manifest.arch;
  i.dtype = dtype_name(b.dtype);
  i.device = b.device.str();
  i.attention = b.manifest.attention;
  i.visual_tokens_per_image = b.manifest.vision.num_patches;
  i.max_context = impl_->max_context();
  return i;
}

}  // namespace era
