// Session: the pipeline's stages in order —
//   image -> preprocess -> vision tower + projector -> reduce -> sequence -> decoder -> sampler.
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <new>

#include "era/era.h"
#include "era/session_impl.h"
#include "image/anyres.h"
#include "image/clip_preprocess.h"
#include "reduce/method.h"
#include "report/attention_report.h"
#include "runtime/anyres_packing.h"
#include "runtime/batch_generator.h"
#include "runtime/generator.h"
#include "runtime/in_decoder_pruning.h"
#include "runtime/sampler.h"
#include "runtime/sequence.h"
#include "text/prompt.h"
#include "text/tokenizer.h"
#include "util/compat.h"
#include "util/error_text.h"

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
  if (r.reduction.tokens < 0) throw Error(ErrorCode::kInvalidArgument, "tokens must be >= 0");
  if (!(r.reduction.keep_ratio >= 0.0f && r.reduction.keep_ratio <= 1.0f)) {
    throw Error(ErrorCode::kInvalidArgument, "keep ratio must be in [0, 1]");
  }
  if (r.reduction.scope != "crop" && r.reduction.scope != "image") {
    throw Error(ErrorCode::kInvalidArgument, "budget scope must be 'crop' or 'image', not '" + r.reduction.scope + "'");
  }
}

ClipImageConfig clip_config(const Manifest& m) {
  ClipImageConfig c;
  c.size = static_cast<int>(m.image.size);
  c.mean = m.image.mean;
  c.std = m.image.std;
  c.pad_color = m.image.pad_color;
  return c;
}

// Tokens to keep out of `n`; n means "all". `nominal` is `tokens` scaled to this unit.
int64_t resolve_budget(const ReductionRequest& r, int64_t n, int64_t nominal) {
  if (r.tokens > 0) return std::min(std::max<int64_t>(nominal, 1), n);
  if (r.keep_ratio > 0.0f) return std::max<int64_t>(1, std::llround(static_cast<double>(r.keep_ratio) * n));
  return n;
}

bool is_era(const std::string& method) { return method == "era" || method.rfind("era:", 0) == 0; }

LarSettings lar_settings(const ReductionOptions& options, int64_t layers) {
  LarSettings lar;
  if (!is_era(options.method)) return lar;  // no bias: the path and scales do not matter
  const EraOptions era = effective_era_options(options);
  lar.layer_scale = lar_layer_scales(era, static_cast<int>(layers));
  lar.path = era.lar_path;
  return lar;
}

ImageReduction describe(const std::string& method, int64_t original, const ReducedTokens& t) {
  ImageReduction d;
  d.method = method;
  d.original_tokens = original;
  d.kept = t.kept;
  d.assignment = t.assignment;
  d.entropy = t.entropy;
  d.cluster_sizes.assign(t.kept.size(), 0);
  for (const int64_t slot : t.assignment) {
    if (slot >= 0) d.cluster_sizes[static_cast<size_t>(slot)]++;
  }
  const auto b = t.log_bias.to(torch::kCPU, torch::kFloat).exp().contiguous();
  d.bias.assign(b.data_ptr<float>(), b.data_ptr<float>() + b.numel());
  return d;
}

// The vision stage's output reduced image by image with one method.
struct ReducedImages {
  std::vector<ReducedTokens> tokens;
  std::vector<ImageReduction> descriptions;
};

// Most crops any pinpoint gives (base + tiles): the paper's nominal NeXT budget is per crop x this.
int64_t max_crops(const Manifest& m) {
  int64_t most = 1;
  for (const auto& p : m.image.grid_pinpoints) most = std::max(most, 1 + (p.height / m.image.size) * (p.width / m.image.size));
  return most;
}

// Throws kPrompt unless the prompt leaves room for at least one answer token.
void check_fits(int64_t text_tokens, int64_t visual_tokens, int64_t context) {
  if (text_tokens + visual_tokens < context) return;
  throw Error(ErrorCode::kPrompt, "prompt too long: " + std::to_string(text_tokens) + " text tokens + " +
                                      std::to_string(visual_tokens) + " image tokens = " +
                                      std::to_string(text_tokens + visual_tokens) + ", but the model's context is " +
                                      std::to_string(context) + " tokens (one must be left to answer)");
}

// The most visual tokens one image can bring: 576 for LLaVA-1.5; for NeXT the base crop plus the
// largest grid with its newlines, before unpad (2928 with the usual pinpoints).
int64_t max_visual_tokens(const Manifest& m) {
  const int64_t n = m.vision.num_patches, p = m.image.size / m.vision.patch_size;
  if (m.image.aspect_ratio != "anyres") return n;
  int64_t most = 0;
  for (const auto& r : m.image.grid_pinpoints) {
    most = std::max(most, n + (r.height / m.image.size * p) * (r.width / m.image.size * p + 1));
  }
  return most;
}

// A reduction chosen over an already packed sequence (`packed`, the "full" packing) expressed in
// the original tokens: `picked` are packed positions. Kept anchors come from the packing (-1 for
// a newline); an original token keeps its slot if its packed position was picked.
ReducedTokens compose_packed(const ReducedTokens& packed, const ReducedTokens& picked) {
  ReducedTokens out = picked;
  out.kept.clear();
  for (const int64_t pos : picked.kept) out.kept.push_back(packed.kept[static_cast<size_t>(pos)]);
  out.assignment.assign(packed.assignment.size(), -1);
  for (size_t i = 0; i < packed.assignment.size(); ++i) {
    const int64_t pos = packed.assignment[i];
    if (pos >= 0) out.assignment[i] = picked.assignment[static_cast<size_t>(pos)];
  }
  out.entropy.clear();
  return out;
}

// One LLaVA-NeXT image (crops [first, first + count)): reduce per crop or over all crops, then
// pack (unpad, newlines) so the reduction follows the same permutation as the features. Methods
// that select over the packed sequence (DivPrune) pack first and select over the real tokens,
// newlines included, with `tokens` as the budget of the whole sequence.
ReducedTokens reduce_anyres(const VisionOutput& vision, int64_t first, int64_t count, const std::array<int64_t, 2>& size,
                            const ReductionRequest& request, const Reducer& reducer, const ModelBundle& bundle,
                            const torch::Tensor& instruction) {
  const auto& m = bundle.manifest;
  const int64_t n = m.vision.num_patches;
  AnyresGeometry geometry;
  geometry.original = {size[0], size[1]};
  const Resolution best = select_best_resolution(geometry.original, m.image.grid_pinpoints);
  geometry.rows = best.height / m.image.size;
  geometry.cols = best.width / m.image.size;
  geometry.patches_per_side = m.image.size / m.vision.patch_size;
  if (reduces_packed_sequence(request.method)) {
    const ReducedTokens packed = pack_anyres(FullReducer().reduce(vision.joint_input(first, count, 0)), geometry, bundle.image_newline);
    ReductionInput in;
    in.embeddings = packed.embeddings;
    in.instruction_embeddings = instruction;
    in.budget = resolve_budget(request, packed.embeddings.size(0), request.tokens);
    return compose_packed(packed, reducer.reduce(in));
  }
  ReducedTokens joint;
  if (request.scope == "image") {
    if (selects_per_crop_only(request.method)) {
      throw Error(ErrorCode::kInvalidArgument, "method " + request.method + " works on one crop's grid: use budget scope 'crop'");
    }
    ReductionInput in = vision.joint_input(first, count, resolve_budget(request, count * n, request.tokens));
    in.instruction_embeddings = instruction;
    joint = reducer.reduce(in);
  } else {
    const torch::Tensor image_embeddings = vision.embeddings.slice(0, first, first + count).flatten(0, 1);
    std::vector<ReducedTokens> per_crop;
    for (int64_t c = 0; c < count; ++c) {
      ReductionInput in = vision.reduction_input(first + c, resolve_budget(request, n, request.tokens / max_crops(m)));
      in.instruction_embeddings = instruction;
      in.image_embeddings = image_embeddings;
      per_crop.push_back(reducer.reduce(in));
    }
    joint = concat_crops(per_crop, n);
  }
  return pack_anyres(joint, geometry, bundle.image_newline);
}

// The decoder's input embeddings [M, D] of the instruction's own text tokens, for methods that
// rank visual tokens against the question (CDPruner): the user's prompt with the image
// placeholders removed, no BOS, no chat template or "ASSISTANT:" suffix. Undefined when the
// method does not need it.
torch::Tensor instruction_embeddings(Session::Impl& impl, const Request& request) {
  if (!needs_instruction_embeddings(request.reduction.method)) return {};
  const std::string& placeholder = impl.bundle.manifest.prompt.image_placeholder;
  std::string text = request.prompt;
  for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at)) text.erase(at, placeholder.size());
  const std::vector<int64_t> ids = impl.bundle.tokenizer->encode(text);
  const auto ids_t = torch::tensor(ids, torch::TensorOptions().dtype(torch::kLong)).reshape({1, -1}).to(impl.bundle.device);
  return impl.decoder->embed(ids_t)[0];
}

ReducedImages reduce_images(const VisionOutput& vision, const PreparedInput& in, const ReductionRequest& request,
                            const ModelBundle& bundle, const torch::Tensor& instruction) {
  const auto& m = bundle.manifest;
  const auto reducer = make_reducer(ReductionOptions{request.method, request.era, request.baselines});
  ReducedImages out;
  int64_t first = 0;
  for (size_t i = 0; i < in.crops_per_image.size(); ++i) {
    const int64_t count = in.crops_per_image[i];
    if (m.image.aspect_ratio == "anyres") {
      out.tokens.push_back(reduce_anyres(vision, first, count, in.image_sizes[i], request, *reducer, bundle, instruction));
    } else {
      const int64_t n = m.vision.num_patches;
      ReductionInput input = vision.reduction_input(first, resolve_budget(request, n, request.tokens));
      input.instruction_embeddings = instruction;
      out.tokens.push_back(reducer->reduce(input));
    }
    out.descriptions.push_back(describe(request.method, count * m.vision.num_patches, out.tokens.back()));
    first += count;
  }
  return out;
}

// FastV / DART: one span per image with its budget (NeXT: the whole packed span, the budget is
// its total), and the pruner. Empty pruner for every other method.
struct InDecoderSetup {
  std::unique_ptr<InDecoderPruner> pruner;
  InDecoderPruning pruning;
};

InDecoderSetup in_decoder_setup(const ReductionRequest& request, const PromptSequence& seq, const Decoder& decoder) {
  InDecoderSetup setup;
  if (!is_in_decoder_method(request.method)) return setup;
  setup.pruner = make_in_decoder_pruner(request.method, request.baselines, decoder.num_layers());
  decoder.require_layer_ranges(request.method);
  setup.pruning.pruner = setup.pruner.get();
  for (const auto& segment : seq.segments) {
    if (segment.kind != SequenceSegment::Kind::kImage) continue;
    setup.pruning.spans.push_back({segment.start, segment.length, resolve_budget(request, segment.length, request.tokens)});
  }
  return setup;
}

// Rewrites each image's description to what layers >= K kept (`kept_in_span`: offsets inside the
// image's span, whose full description lists the original index at each offset).
void describe_in_decoder(const std::vector<std::vector<int64_t>>& kept_in_span, std::vector<ImageReduction>& reductions) {
  for (size_t i = 0; i < reductions.size() && i < kept_in_span.size(); ++i) {
    ImageReduction& d = reductions[i];
    const std::vector<int64_t> span_originals = d.kept;  // "full": every token of the span
    d.kept.clear();
    d.assignment.assign(static_cast<size_t>(d.original_tokens), -1);
    d.cluster_sizes.clear();
    for (const int64_t offset : kept_in_span[i]) {
      const int64_t original = span_originals[static_cast<size_t>(offset)];
      if (original >= 0) d.assignment[static_cast<size_t>(original)] = static_cast<int64_t>(d.kept.size());
      d.cluster_sizes.push_back(original >= 0 ? 1 : 0);  // a NeXT newline stands for no vision token
      d.kept.push_back(original);
    }
    d.bias.assign(d.kept.size(), 1.0f);
  }
}


// Python's str.strip() on ASCII whitespace, as LLaVA's output post-processing.
std::string strip(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\n\r\f\v");
  const auto last = s.find_last_not_of(" \t\n\r\f\v");
  return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

// What an on_text callback threw, carried through the generator untouched (it is no std::exception,
// so no handler on the way converts it) and rethrown as it was by rethrow_as_era_error.
struct CallbackThrew {
  std::exception_ptr error;
};

std::function<bool(const std::string&)> relay_exceptions(const std::function<bool(const std::string&)>& on_text) {
  if (!on_text) return nullptr;
  return [&on_text](const std::string& piece) {
    try {
      return on_text(piece);
    } catch (...) {
      throw CallbackThrew{std::current_exception()};
    }
  };
}

// Called from a catch (...) around a public call: era::Error and callback exceptions pass
// unchanged; anything else (LibTorch, OpenCV, the standard library) becomes kRuntime, so no
// other exception type leaves the library.
[[noreturn]] void rethrow_as_era_error() {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const CallbackThrew& c) {
    std::rethrow_exception(c.error);
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kRuntime, "model failed: " + error_summary(e.what()));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kRuntime, "out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kRuntime, std::string("internal failure: ") + error_summary(e.what()));
  } catch (...) {
    throw Error(ErrorCode::kRuntime, "internal failure of unknown type");
  }
}

// Serialises a public call with the Session's other calls (the lock is recursive: generate_batch
// and generate call prepare). A moved-from Session has no Impl and refuses every call.
std::unique_lock<std::recursive_mutex> lock_session(const std::unique_ptr<Session::Impl>& impl) {
  if (!impl) throw Error(ErrorCode::kInvalidArgument, "this era::Session was moved from");
  return std::unique_lock<std::recursive_mutex>(impl->mutex);
}

// An Image of a request as the contiguous RGB matrix load_rgb_image gives for a file, so every
// source goes through the same preprocessing.
cv::Mat rgb_of(const Image& image, const ImageLimits& limits) {
  switch (image.source()) {
    case Image::Source::kFile:
      return load_rgb_image(image.name(), limits);
    case Image::Source::kEncoded:
      return decode_rgb_image(image.data(), image.size_bytes(), image.name(), limits);
    case Image::Source::kPixels:
      return rgb_from_buffer(image.data(), image.width(), image.height(), 3, image.width() * 3, limits);
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown image source");
}

// Everything before the decoder for one request: preprocess, vision, reduce, splice. Fills the
// result's stats and reductions; throws kPrompt if the sequence leaves no room to answer.
PromptSequence stage_request(Session::Impl& impl, const Session& session, const Request& request, Result& result) {
  auto& st = result.stats;
  auto t0 = Clock::now();
  const PreparedInput in = session.prepare(request);
  st.preprocess_ms = ms_since(t0);
  ReducedImages images;
  if (in.pixel_values.size(0) > 0) {
    t0 = Clock::now();
    const VisionOutput vision = impl.vision->encode(in.pixel_values);
    st.vision_ms = ms_since(t0);
    t0 = Clock::now();
    images = reduce_images(vision, in, request.reduction, impl.bundle, instruction_embeddings(impl, request));
    st.reduce_ms = ms_since(t0);
  }
  PromptSequence seq = build_sequence(*impl.decoder, in.token_ids, in.image_token_id, images.tokens);
  result.reductions = std::move(images.descriptions);
  st.visual_tokens = seq.visual_tokens();
  st.visual_tokens_early_layers = st.visual_tokens;
  st.text_tokens = seq.text_tokens();
  st.prompt_tokens = seq.length();
  check_fits(st.text_tokens, st.visual_tokens, impl.max_context());
  return seq;
}

}  // namespace

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Session Session::open(const std::string& bundle_dir, const SessionOptions& options) try {
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
  return Session(std::move(impl));
} catch (...) {
  rethrow_as_era_error();
}

PreparedInput Session::prepare(const Request& request) const try {
  const auto lock = lock_session(impl_);
  const auto& m = impl_->bundle.manifest;
  PreparedInput in;
  const int n_images = static_cast<int>(request.images.size() + request.image_buffers.size());
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

  // Fail before any image work when the text alone cannot fit; the full check, with the real
  // number of (reduced) visual tokens, runs once the sequence is built.
  const int64_t text_tokens = static_cast<int64_t>(in.token_ids.size()) - n_images;
  check_fits(text_tokens, 0, impl_->max_context());

  const auto config = clip_config(m);
  std::vector<torch::Tensor> pixels, display;
  auto add_crop = [&](const cv::Mat& crop) {
    pixels.push_back(normalize_to_chw(crop, config));
    display.push_back(torch::from_blob(crop.data, {crop.rows, crop.cols, 3}, torch::kUInt8).clone());
  };
  std::vector<Image> images;
  for (const auto& path : request.images) images.push_back(Image::from_file(path));
  images.insert(images.end(), request.image_buffers.begin(), request.image_buffers.end());
  for (const auto& image : images) {
    const cv::Mat rgb = rgb_of(image, impl_->image_limits);
    in.image_sizes.push_back({rgb.rows, rgb.cols});
    if (m.image.aspect_ratio == "anyres") {
      const AnyresCrops crops = make_anyres_crops(rgb, m.image.grid_pinpoints, config.size);
      for (const auto& crop : crops.crops) add_crop(crop);
      in.crops_per_image.push_back(static_cast<int64_t>(crops.crops.size()));
    } else {
      add_crop(square_llava_pad(rgb, config));
      in.crops_per_image.push_back(1);
    }
  }
  const int64_t s = m.image.size;
  in.pixel_values = pixels.empty() ? torch::empty({0, 3, s, s}) : torch::stack(pixels);
  in.display_images = display.empty() ? torch::empty({0, s, s, 3}, torch::kUInt8) : torch::stack(display);
  return in;
} catch (...) {
  rethrow_as_era_error();
}

Result Session::generate(const Request& request) try {
  const auto lock = lock_session(impl_);
  check_request(request);
  c10::InferenceMode inference;
  Result result;
  auto& st = result.stats;
  const auto t_start = Clock::now();

  const auto& m = impl_->bundle.manifest;
  try {
    const PromptSequence seq = stage_request(*impl_, *this, request, result);
    const int64_t room = impl_->max_context() - seq.length();
    GenerationLimits limits;
    limits.max_new_tokens = std::min<int64_t>(request.max_new_tokens, room);
    limits.stop_at_eos = request.stop_at_eos;
    // The last sampled token is never fed back, so max_new_tokens - 1 decode slots suffice.
    KvCache cache = impl_->decoder->make_cache(1, seq.length() + std::max<int64_t>(limits.max_new_tokens - 1, 0));
    Sampler sampler({request.temperature, request.top_p, request.seed});
    const InDecoderSetup in_decoder = in_decoder_setup(request.reduction, seq, *impl_->decoder);
    Generator generator(*impl_->decoder, *impl_->bundle.tokenizer, m.tokens.eos_id,
                        lar_settings({request.reduction.method, request.reduction.era, request.reduction.baselines}, m.text.num_layers),
                        in_decoder.pruner ? &in_decoder.pruning : nullptr);
    GenerationOutput out = generator.run(seq, limits, sampler, cache, relay_exceptions(request.on_text));
    if (in_decoder.pruner && !out.kept_in_span.empty()) {  // report what layers >= K really saw
      st.visual_tokens = out.pruned_visual_tokens;
      st.prompt_tokens = st.text_tokens + st.visual_tokens;
      describe_in_decoder(out.kept_in_span, result.reductions);
    }

    result.tokens = std::move(out.tokens);
    result.finish_reason = out.finish_reason;
    result.text = strip(out.text);
    st.prefill_ms = out.prefill_ms;
    st.decode_step_ms = std::move(out.decode_ms);
    for (double ms : st.decode_step_ms) st.decode_ms += ms;
    st.generated_tokens = static_cast<int64_t>(result.tokens.size());
    st.kv_cache_bytes = cache.bytes_used();
    st.kv_cache_allocated_bytes = cache.bytes_allocated();
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kRuntime, "model failed: " + error_summary(e.what()));
  }
  st.total_ms = ms_since(t_start);
  return result;
} catch (...) {
  rethrow_as_era_error();
}

std::vector<Result> Session::generate_batch(const std::vector<Request>& requests) try {
  const auto lock = lock_session(impl_);
  if (requests.empty()) return {};
  const auto& m = impl_->bundle.manifest;
  auto lar_of = [&](const Request& r) { return lar_settings({r.reduction.method, r.reduction.era, r.reduction.baselines}, m.text.num_layers); };
  const LarSettings lar = lar_of(requests.front());
  bool one_lar = true;
  for (const Request& r : requests) {
    const LarSettings other = lar_of(r);
    one_lar = one_lar && other.layer_scale == lar.layer_scale && other.path == lar.path;
  }
  bool in_decoder = false;  // FastV / DART prune per sequence inside prefill: no batched path
  for (const Request& r : requests) in_decoder = in_decoder || is_in_decoder_method(r.reduction.method);
  if (requests.size() == 1 || !one_lar || in_decoder) {  // one decoder call serves one LAR setting
    std::vector<Result> results;
    for (const Request& r : requests) {
      Request quiet = r;
      quiet.on_text = nullptr;
      results.push_back(generate(quiet));
    }
    return results;
  }

  c10::InferenceMode inference;
  const auto t_start = Clock::now();
  std::vector<Result> results(requests.size());
  std::vector<PromptSequence> sequences;
  std::vector<GenerationLimits> limits;
  std::vector<Sampler> samplers;
  try {
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request& request = requests[i];
      check_request(request);
      sequences.push_back(stage_request(*impl_, *this, request, results[i]));
      const auto& seq = sequences.back();
      limits.push_back({std::min<int64_t>(request.max_new_tokens, impl_->max_context() - seq.length()), request.stop_at_eos});
      samplers.emplace_back(SamplingOptions{request.temperature, request.top_p, request.seed});
    }
    int64_t kv_used = 0, kv_allocated = 0;
    BatchGenerator generator(*impl_->decoder, *impl_->bundle.tokenizer, m.tokens.eos_id, lar);
    auto outputs = generator.run(sequences, limits, samplers, &kv_used, &kv_allocated);
    for (size_t i = 0; i < requests.size(); ++i) {
      auto& r = results[i];
      auto& out = outputs[i];
      r.tokens = std::move(out.tokens);
      r.finish_reason = out.finish_reason;
      r.text = strip(out.text);
      r.stats.prefill_ms = out.prefill_ms;
      r.stats.decode_step_ms = std::move(out.decode_ms);
      for (double ms : r.stats.decode_step_ms) r.stats.decode_ms += ms;
      r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
      r.stats.kv_cache_bytes = kv_used;
      r.stats.kv_cache_allocated_bytes = kv_allocated;
      r.stats.total_ms = ms_since(t_start);
    }
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kRuntime, "model failed: " + error_summary(e.what()));
  }
  return results;
} catch (...) {
  rethrow_as_era_error();
}

AttentionReport Session::attention_report(const Request& request) try {
  const auto lock = lock_session(impl_);
  check_request(request);
  c10::InferenceMode inference;
  const PreparedInput in = prepare(request);
  if (in.pixel_values.size(0) == 0) throw Error(ErrorCode::kInvalidArgument, "the attention report needs at least one image");
  if (is_in_decoder_method(request.reduction.method)) {
    throw Error(ErrorCode::kInvalidArgument, "the attention report compares pre-decoder reductions; '" + request.reduction.method +
                                                 "' prunes inside the decoder");
  }
  const auto& m = impl_->bundle.manifest;
  try {
    const VisionOutput vision = impl_->vision->encode(in.pixel_values);
    ReductionRequest full_request = request.reduction;
    full_request.method = "full";
    const ReducedImages full = reduce_images(vision, in, full_request, impl_->bundle, {});
    const ReducedImages reduced = reduce_images(vision, in, request.reduction, impl_->bundle, instruction_embeddings(*impl_, request));
    auto& dec = *impl_->decoder;
    const PromptSequence seq_full = build_sequence(dec, in.token_ids, in.image_token_id, full.tokens);
    const PromptSequence seq_reduced = build_sequence(dec, in.token_ids, in.image_token_id, reduced.tokens);
    check_fits(seq_full.text_tokens(), seq_full.visual_tokens(), impl_->max_context());

    KvCache cache_full = dec.make_cache(1, seq_full.length());
    const auto attn_full = dec.forward_with_attention(seq_full.embeds, seq_full.positions, seq_full.key_log_bias, cache_full).second;
    KvCache cache_reduced = dec.make_cache(1, seq_reduced.length());
    const auto attn_reduced =
        dec.forward_with_attention(seq_reduced.embeds, seq_reduced.positions, seq_reduced.key_log_bias, cache_reduced,
                                   lar_settings({request.reduction.method, request.reduction.era, request.reduction.baselines}, m.text.num_layers))
            .second;
    AttentionReport report = compare_last_query_attention(seq_full, attn_full, seq_reduced, attn_reduced);
    report.method = request.reduction.method;
    return report;
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::kRuntime, "model failed: " + error_summary(e.what()));
  }
} catch (...) {
  rethrow_as_era_error();
}

ModelInfo Session::info() const {
  const auto lock = lock_session(impl_);
  const auto& b = impl_->bundle;
  ModelInfo i;
  i.name = b.manifest.model_name;
  i.arch = b.manifest.arch;
  i.dtype = dtype_name(b.dtype);
  i.device = b.device.str();
  i.attention = b.manifest.attention;
  i.visual_tokens_per_image = max_visual_tokens(b.manifest);
  i.tokens_per_crop = b.manifest.vision.num_patches;
  i.max_context = impl_->max_context();
  i.tokenizer_shim = sentencepiece_shim_path();  // loaded by open(): cannot throw here
  return i;
}

}  // namespace era
