#include "pipeline/reduction_stage.h"

#include "reduce/budget.h"
#include "reduce/lar_schedule.h"

namespace era {
namespace {

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

// The decoder's input embeddings [M, D] of the instruction's own text tokens, for methods that
// rank visual tokens against the question (CDPruner): the user's prompt with the image
// placeholders removed, no BOS, no chat template or "ASSISTANT:" suffix.
torch::Tensor instruction_embeddings(const SessionState& impl, const Request& request) {
  std::string text = request.prompt;
  for (const std::string& placeholder :
       {impl.family->prompt().image_placeholder(), impl.bundle.manifest.prompt.video_placeholder}) {
    for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at))
      text.erase(at, placeholder.size());
  }
  const std::vector<int64_t> ids = impl.bundle.tokenizer->encode(text);
  const auto ids_t = torch::tensor(ids, torch::TensorOptions().dtype(torch::kLong)).reshape({1, -1}).to(impl.bundle.device);
  return impl.decoder->embed(ids_t)[0];
}

}  // namespace

VisionOutput encode_vision(const SessionState& impl, const PreparedRequest& prepared) {
  return impl.vision->encode(prepared.pixels);
}

ReducedImages reduce_images(const SessionState& impl, const VisionOutput& vision, const PreparedRequest& prepared,
                            const Request& request) {
  const MethodSpec& method = find_method(request.reduction.method);
  const torch::Tensor instruction =
      method.capabilities.needs_instruction ? instruction_embeddings(impl, request) : torch::Tensor();
  // Under select_strategy "full" the CLS token is a visual token too: every method's saliency,
  // pooling and grid geometry cover the patches only, so only "full" (keep everything) runs.
  if (impl.bundle.manifest.vision.keeps_cls() && method.name != "full") {
    throw Error(ErrorCode::kInvalidArgument, "reduction method '" + method.name +
                                                 "' is not supported for this bundle: its checkpoint keeps the CLS token "
                                                 "(vision_feature_select_strategy \"full\"); only method 'full' runs on it");
  }
  // A tower without a CLS token (SigLIP): VisionZip has nothing to rank by; ERA's DEP reads the
  // mean attention each token receives (readout "mean"), the one readout such a tower has
  // (docs/methods.md, decisions: "DEP saliency without a CLS token").
  ReductionRequest reduction = request.reduction;
  if (!impl.bundle.manifest.vision.has_cls) {
    if (method.capabilities.needs_cls) {
      throw Error(ErrorCode::kInvalidArgument, "reduction method '" + method.name +
                                                   "' ranks tokens by the vision tower's "
                                                   "CLS token, which this bundle's tower has none of (" +
                                                   impl.bundle.manifest.arch + ", vision.has_cls false)");
    }
    reduction.era.readout = SaliencyReadout::kMean;
  }
  const auto reducer = make_reducer(reduction);
  ReducedImages out;
  const TokenPacker& packer = impl.family->packer();
  int64_t first = 0, first_token = 0;  // where the next item's views and tokens start in this vision pass
  for (const ImageTokens& prepared_item : prepared.items) {
    ImageTokens item = prepared_item;  // its media, view count, size, grid and time step, as prepared
    item.vision = &vision;
    item.instruction = instruction;
    item.first = first;
    item.first_token = first_token;
    const int64_t original = packer.item_tokens(item);
    out.tokens.push_back(packer.reduce(item, method, *reducer, reduction));
    out.descriptions.push_back(describe(method.name, original, out.tokens.back()));
    out.descriptions.back().media = item.media;
    first += item.count;
    first_token += original;
  }
  return out;
}

LarSettings lar_settings(const ReductionRequest& request, int64_t num_layers) {
  LarSettings lar;
  const MethodSpec& method = find_method(request.method);
  if (!method.rectifies_attention()) return lar;  // no bias: the path and scales do not matter
  const EraOptions era = method.era_options(request.era);
  lar.layer_scale = lar_layer_scales(era, static_cast<int>(num_layers));
  lar.path = era.lar_path;
  return lar;
}

InDecoderSetup in_decoder_setup(const ReductionRequest& request, const PromptSequence& seq, const Decoder& decoder) {
  InDecoderSetup setup;
  const MethodSpec& method = find_method(request.method);
  if (method.stage != MethodStage::kInDecoder) return setup;
  setup.pruner = method.make_pruner(request.baselines, decoder.num_layers());
  decoder.require_layer_ranges(method.name);
  setup.pruning.pruner = setup.pruner.get();
  for (const auto& segment : seq.segments) {
    if (segment.kind != SequenceSegment::Kind::kImage) continue;
    setup.pruning.spans.push_back({segment.start, segment.length, resolve_budget(request, segment.length, request.tokens)});
  }
  return setup;
}

void describe_in_decoder(const std::vector<std::vector<int64_t>>& kept_in_span, std::vector<ImageReduction>& reductions) {
  for (size_t i = 0; i < reductions.size() && i < kept_in_span.size(); ++i) {
    ImageReduction& d = reductions[i];
    const std::vector<int64_t> span_originals = d.kept;  // unreduced before the decoder: every token of the span
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

}  // namespace era
