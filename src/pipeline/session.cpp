// Session: the pipeline's stages in order —
//   image -> preprocess (family) -> vision tower + projector -> reduce (method registry, family)
//   -> sequence -> decoder with LAR -> sampler.
// Each stage is its own unit (preparation, reduction_stage, runtime/); this file wires them and
// keeps the public calls' contract (locking, error conversion, statistics).
#include <ATen/Parallel.h>

#include <chrono>
#include <mutex>

#include "era/debug.h"
#include "era/era.h"
#include "family/model_family.h"
#include "model/cpu_matmul.h"
#include "model/graph_optimizer.h"
#include "model/native_decoder.h"
#include "pipeline/attention_report.h"
#include "pipeline/error_boundary.h"
#include "pipeline/preparation.h"
#include "pipeline/reduction_stage.h"
#include "pipeline/request_validation.h"
#include "pipeline/session_internals.h"
#include "runtime/batch_generator.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"
#include "util/cpu_threads.h"
#include "util/device.h"
#include "util/openblas_core.h"
#include "util/stage_scope.h"
#include "util/stopwatch.h"

namespace era {

// An answer length the model can never give is a bad request (exit 2 in the tools), not a limit
// to cut silently: the prompt needs at least one position of the context too.
namespace {

// Python's str.strip() on ASCII whitespace, as LLaVA's output post-processing.
std::string strip(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\n\r\f\v");
  const auto last = s.find_last_not_of(" \t\n\r\f\v");
  return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

// Everything before the decoder for one request: preprocess, vision, reduce, splice. Fills the
// result's stats and reductions; throws kPrompt if the sequence leaves no room to answer.
PromptSequence stage_request(SessionState& impl, const Request& request, Result& result) {
  auto& st = result.stats;
  Stopwatch clock;
  const PreparedRequest prepared = [&] {
    ERA_STAGE_SCOPE("preprocess");
    return prepare_request(impl, request);
  }();
  st.preprocess_ms = clock.lap_ms();
  ReducedImages images;
  if (prepared.has_pixels()) {
    // A GPU runs the stages asynchronously: wait for each before reading the clock, or its time
    // would be billed to the next stage (which waits for it).
    const VisionOutput vision = [&] {
      ERA_STAGE_SCOPE("vision");
      return encode_vision(impl, prepared);
    }();
    device::synchronize(impl.bundle.device);
    st.vision_ms = clock.lap_ms();
    {
      ERA_STAGE_SCOPE("reduce");
      images = reduce_images(impl, vision, prepared, request);
    }
    device::synchronize(impl.bundle.device);
    st.reduce_ms = clock.lap_ms();
  }
  PromptSequence seq = build_sequence(*impl.decoder, prepared.input.token_ids, prepared.input.image_token_id,
                                      prepared.input.video_token_id, images.tokens);
  seq.compact_positions = request.reduction.positions == "compact";
  seq.positions = impl.family->positions().position_ids(seq);
  result.reductions = std::move(images.descriptions);
  st.visual_tokens = seq.visual_tokens();
  st.visual_tokens_early_layers = st.visual_tokens;
  st.text_tokens = seq.text_tokens();
  st.prompt_tokens = seq.length();
  check_fits(st.text_tokens, st.visual_tokens, impl.bundle.manifest.text, video_length_hint(request));
  return seq;
}

// A generation's output into the result (one place for generate and generate_batch).
void fill_result(GenerationOutput& out, int64_t kv_used, int64_t kv_allocated, Result& r) {
  r.tokens = std::move(out.tokens);
  r.finish_reason = out.finish_reason;
  r.text = strip(out.text);
  r.stats.prefill_ms = out.prefill_ms;
  r.stats.decode_step_ms = std::move(out.decode_ms);
  r.stats.decode_ms = 0;
  for (double ms : r.stats.decode_step_ms) r.stats.decode_ms += ms;
  r.stats.generated_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.kv_cache_bytes = kv_used;
  r.stats.kv_cache_allocated_bytes = kv_allocated;
}

}  // namespace

std::unique_lock<std::recursive_mutex> SessionAccess::lock(const Session& session) {
  if (!session.impl_) throw Error(ErrorCode::kInvalidArgument, "this era::Session was moved from");
  return std::unique_lock<std::recursive_mutex>(session.impl_->mutex);
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Session Session::open(const std::string& bundle_dir, const SessionOptions& options) try {
  // Options are checked before the (slow) load, the thread count only after it: it depends on
  // where the bundle's products run (util/cpu_threads.h).
  check_cpu_threads(options.num_threads);
  const CpuMatmul cpu_matmul = parse_cpu_matmul(options.cpu_matmul);
  const JitOptimize jit_optimize = parse_jit_optimize(options.jit_optimize);
  const auto device = device::resolve(options.device);
  std::optional<torch::ScalarType> dtype;
  if (!options.dtype.empty()) dtype = parse_dtype(options.dtype);

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->image_limits.max_pixels = options.max_image_pixels;
  impl->bundle = load_bundle(bundle_dir, device, dtype,
                             {check_family_sections, check_family_modules, load_family_native_vision, manifest_from_hf_folder},
                             options.hf_weights);
  impl->bundle.optimize_graphs = optimize_graphs(jit_optimize, device);
  apply_cpu_matmul(impl->bundle, cpu_matmul);
  const int torch_threads = configure_cpu_threads(options.num_threads, cpu_matmuls_in_float32(impl->bundle, cpu_matmul));
  if (impl->bundle.device.is_cpu())
    impl->blas_threads_note = blas_threads_note(blas_runs_own_threads(), usable_cpu_count(), torch_threads, options.num_threads);
  impl->family = make_model_family(impl->bundle);
  impl->vision = std::make_unique<VisionEncoder>(impl->bundle);
  impl->decoder = std::make_unique<Decoder>(impl->bundle);
  return Session(std::move(impl));
} catch (...) {
  rethrow_as_era_error();
}

PreparedInput Session::prepare(const Request& request) const try {
  const auto lock = SessionAccess::lock(*this);
  return prepare_request(*impl_, request).input;
} catch (...) {
  rethrow_as_era_error();
}

Result Session::generate(const Request& request) try {
  const auto lock = SessionAccess::lock(*this);
  validate_request(request, impl_->max_context());
  c10::InferenceMode inference;
  Result result;
  auto& st = result.stats;
  Stopwatch total;
  const auto& m = impl_->bundle.manifest;
  const PromptSequence seq = stage_request(*impl_, request, result);
  GenerationLimits limits;
  limits.max_new_tokens = std::min<int64_t>(request.max_new_tokens, impl_->max_context() - seq.length());
  limits.stop_at_eos = request.stop_at_eos;
  // The last sampled token is never fed back, so max_new_tokens - 1 decode slots suffice.
  KvCache cache = impl_->decoder->make_cache(1, seq.length() + std::max<int64_t>(limits.max_new_tokens - 1, 0));
  Sampler sampler({request.temperature, request.top_p, request.seed});
  const InDecoderSetup in_decoder = in_decoder_setup(request.reduction, seq, *impl_->decoder);
  Generator generator(*impl_->decoder, *impl_->bundle.tokenizer, m.tokens.stop_ids,
                      lar_settings(request.reduction, m.text.num_layers), in_decoder.pruner ? &in_decoder.pruning : nullptr);
  GenerationOutput out = generator.run(seq, limits, sampler, cache, relay_exceptions(request.on_text));
  if (in_decoder.pruner && !out.kept_in_span.empty()) {  // report what layers >= K really saw
    st.visual_tokens = out.pruned_visual_tokens;
    st.prompt_tokens = st.text_tokens + st.visual_tokens;
    describe_in_decoder(out.kept_in_span, result.reductions);
  }
  fill_result(out, cache.bytes_used(), cache.bytes_allocated(), result);
  st.total_ms = total.elapsed_ms();
  return result;
} catch (...) {
  rethrow_as_era_error();
}

std::vector<Result> Session::generate_batch(const std::vector<Request>& requests) try {
  const auto lock = SessionAccess::lock(*this);
  if (requests.empty()) return {};
  for (const Request& r : requests) {
    validate_request(r, impl_->max_context());
  }
  const auto& m = impl_->bundle.manifest;
  const LarSettings lar = lar_settings(requests.front().reduction, m.text.num_layers);
  bool one_lar = true, in_decoder = false;
  for (const Request& r : requests) {
    const LarSettings other = lar_settings(r.reduction, m.text.num_layers);
    one_lar = one_lar && other.layer_scale == lar.layer_scale && other.path == lar.path;
    // FastV / DART prune per sequence inside prefill: no batched path.
    in_decoder = in_decoder || find_method(r.reduction.method).stage == MethodStage::kInDecoder;
  }
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
  Stopwatch total;
  std::vector<Result> results(requests.size());
  std::vector<PromptSequence> sequences;
  std::vector<GenerationLimits> limits;
  std::vector<Sampler> samplers;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& request = requests[i];
    sequences.push_back(stage_request(*impl_, request, results[i]));
    const auto& seq = sequences.back();
    limits.push_back({std::min<int64_t>(request.max_new_tokens, impl_->max_context() - seq.length()), request.stop_at_eos});
    samplers.emplace_back(SamplingOptions{request.temperature, request.top_p, request.seed});
  }
  int64_t kv_used = 0, kv_allocated = 0;
  BatchGenerator generator(*impl_->decoder, *impl_->bundle.tokenizer, m.tokens.stop_ids, lar);
  auto outputs = generator.run(sequences, limits, samplers, &kv_used, &kv_allocated);
  for (size_t i = 0; i < requests.size(); ++i) {
    fill_result(outputs[i], kv_used, kv_allocated, results[i]);
    results[i].stats.total_ms = total.elapsed_ms();
  }
  return results;
} catch (...) {
  rethrow_as_era_error();
}

AttentionReport Session::attention_report(const Request& request) try {
  const auto lock = SessionAccess::lock(*this);
  validate_request(request, impl_->max_context());
  c10::InferenceMode inference;
  const PreparedRequest prepared = prepare_request(*impl_, request);
  if (!prepared.has_pixels()) throw Error(ErrorCode::kInvalidArgument, "the attention report needs at least one image");
  if (find_method(request.reduction.method).stage == MethodStage::kInDecoder) {
    throw Error(ErrorCode::kInvalidArgument, "the attention report compares pre-decoder reductions; '" +
                                                 request.reduction.method + "' prunes inside the decoder");
  }
  const auto& m = impl_->bundle.manifest;
  const VisionOutput vision = encode_vision(*impl_, prepared);
  Request unreduced = request;
  unreduced.reduction.method = unreduced_method().name;
  const ReducedImages full = reduce_images(*impl_, vision, prepared, unreduced);
  const ReducedImages reduced = reduce_images(*impl_, vision, prepared, request);
  auto& dec = *impl_->decoder;
  const PreparedInput& in = prepared.input;
  PromptSequence seq_full = build_sequence(dec, in.token_ids, in.image_token_id, in.video_token_id, full.tokens);
  PromptSequence seq_reduced = build_sequence(dec, in.token_ids, in.image_token_id, in.video_token_id, reduced.tokens);
  seq_full.positions = impl_->family->positions().position_ids(seq_full);
  seq_reduced.compact_positions = request.reduction.positions == "compact";
  seq_reduced.positions = impl_->family->positions().position_ids(seq_reduced);
  check_fits(seq_full.text_tokens(), seq_full.visual_tokens(), impl_->bundle.manifest.text);

  KvCache cache_full = dec.make_cache(1, seq_full.length());
  const auto attn_full =
      dec.forward_with_attention(seq_full.embeds, seq_full.positions, seq_full.key_log_bias, cache_full).second;
  KvCache cache_reduced = dec.make_cache(1, seq_reduced.length());
  const auto attn_reduced = dec.forward_with_attention(seq_reduced.embeds, seq_reduced.positions, seq_reduced.key_log_bias,
                                                       cache_reduced, lar_settings(request.reduction, m.text.num_layers))
                                .second;
  AttentionReport report = compare_last_query_attention(seq_full, attn_full, seq_reduced, attn_reduced);
  report.method = request.reduction.method;
  return report;
} catch (...) {
  rethrow_as_era_error();
}

ModelInfo Session::info() const {
  const auto lock = SessionAccess::lock(*this);
  const auto& b = impl_->bundle;
  ModelInfo i;
  i.name = b.manifest.model_name;
  i.arch = b.manifest.arch;
  i.dtype = dtype_name(b.dtype);
  i.device = b.device.str();
  i.attention = b.manifest.attention;
  i.decoder = impl_->decoder->backend_name();
  i.vision = impl_->vision->backend_name();
  i.visual_tokens_per_image = impl_->family->packer().max_visual_tokens();
  i.tokens_per_crop = b.manifest.vision.tokens_per_crop;
  i.max_context = impl_->max_context();
  i.tokenizer_shim = sentencepiece_shim_path();  // loaded by open(): cannot throw here
  if (b.device.is_cpu()) {
    const std::string core = openblas_core_for_this_process();
    if (!core.empty())
      i.performance_note = "OpenBLAS runs its " + openblas_core_name() +
                           " kernels on this CPU (a model newer than the library): set OPENBLAS_CORETYPE=" + core +
                           " before the program starts";
    const std::string& threads = impl_->blas_threads_note;
    if (!threads.empty()) i.performance_note += (i.performance_note.empty() ? "" : "; ") + threads;
  }
  return i;
}

debug::PreparedTensors debug::prepare(const Session& session, const Request& request) try {
  const auto lock = SessionAccess::lock(session);
  PreparedRequest prepared = prepare_request(SessionAccess::state(session), request);
  debug::PreparedTensors out;
  static_cast<PreparedInput&>(out) = std::move(prepared.input);
  out.pixel_values = std::move(prepared.pixels.pixel_values);
  return out;
} catch (...) {
  rethrow_as_era_error();
}

debug::PromptTensors debug::prompt(Session& session, const Request& request) try {
  const auto lock = SessionAccess::lock(session);
  validate_request(request);
  if (find_method(request.reduction.method).stage == MethodStage::kInDecoder) {
    throw Error(ErrorCode::kInvalidArgument, "debug::prompt: method '" + request.reduction.method +
                                                 "' prunes inside the decoder; its prompt is not one sequence");
  }
  c10::InferenceMode inference;
  SessionState& impl = SessionAccess::state(session);
  Result scratch;
  const PromptSequence seq = stage_request(impl, request, scratch);
  const int64_t num_layers = impl.bundle.manifest.text.num_layers;
  const LarSettings lar = lar_settings(request.reduction, num_layers);
  KvCache cache = impl.decoder->make_cache(1, seq.length());
  debug::PromptTensors out;
  out.logits = impl.decoder->forward(seq.embeds, seq.positions, seq.key_log_bias, cache, /*last_only=*/false, lar)[0];
  out.embeds = seq.embeds;
  out.positions = seq.positions;
  out.key_log_bias = seq.key_log_bias;
  // LarSettings' empty scale list means 1 in every layer
  out.layer_bias_scale = lar.layer_scale.empty() ? std::vector<float>(static_cast<size_t>(num_layers), 1.0f) : lar.layer_scale;
  out.visual_tokens = seq.visual_tokens();
  return out;
} catch (...) {
  rethrow_as_era_error();
}

}  // namespace era
