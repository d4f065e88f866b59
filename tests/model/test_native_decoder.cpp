// era's own C++ decoder (model/native_decoder.h over layers/llama_decoder.h), its weights read from
// the Hugging Face folder, against the TorchScript decoder.pt exported from the same checkpoint:
// LLaMA (tiny-llava-1.5, transformers' own save_pretrained folder), and Qwen2 with grouped-query
// attention, q/k/v biases, M-RoPE and a tied head (the tiny Qwen2.5-VL bundle and the decoder
// folder make_random_bundle.py writes beside it). Both LAR forms, per-layer LAR scales, layer
// ranges with attention logits, 32 greedy steps over the cache, and the Session end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bundle_session.h"
#include "era/era.h"
#include "era/error.h"
#include "model/bundle.h"
#include "model/cpu_matmul.h"
#include "model/decoder.h"
#include "model/native_decoder.h"
#include "parity_support.h"
#include "test_support.h"

namespace era {
namespace {

namespace fs = std::filesystem;
using test::max_rel_error;

struct Case {
  std::string bundle, weights;
};

Case llama() { return {test::bundle_dir(), test::checkpoint_dir()}; }
Case qwen2() { return {test::testdata_dir() + "/bundle-qwen2.5-vl", test::testdata_dir() + "/hf-qwen2.5-vl"}; }

// Random but fixed inputs of T tokens: embeddings of ids, positions (1-D or M-RoPE triples with
// distinct axes), and a LAR log-bias on every other token (0 elsewhere: plain keys).
struct Inputs {
  torch::Tensor ids, positions, log_bias;
};

Inputs inputs(const ModelBundle& b, int64_t T, int64_t start = 0) {
  torch::manual_seed(static_cast<uint64_t>(7 + start));
  Inputs in;
  in.ids = torch::randint(3, std::min<int64_t>(b.manifest.tokens.tokenizer_vocab_size, b.manifest.text.vocab_size), {1, T},
                          torch::kLong);
  const torch::Tensor p = torch::arange(start, start + T, torch::kLong).unsqueeze(0);
  in.positions = b.manifest.text.mrope_section.empty() ? p : torch::stack({p, p / 2, p % 5}, -1);
  in.log_bias = torch::log(torch::rand({1, T}) * 3 + 0.5) * (torch::arange(T) % 2).to(torch::kFloat).unsqueeze(0);
  return in;
}

// One bundle, its TorchScript decoder and the native one over the HF folder's weights.
struct Pair {
  explicit Pair(const Case& c, std::optional<torch::ScalarType> dtype = std::nullopt)
      : bundle(load_bundle(c.bundle, torch::kCPU, dtype)), torchscript(bundle) {
    bundle.native_decoder = load_native_decoder(c.weights, bundle.manifest, bundle.device, bundle.dtype);
    apply_cpu_matmul(bundle, CpuMatmul::kAuto);
    native = std::make_unique<Decoder>(bundle);
  }
  ModelBundle bundle;
  Decoder torchscript;
  std::unique_ptr<Decoder> native;
};

class NativeDecoder : public ::testing::TestWithParam<std::string> {
 protected:
  Case which() const { return GetParam() == "llama" ? llama() : qwen2(); }
  c10::InferenceMode inference_;
};

TEST_P(NativeDecoder, PrefillAndThirtyTwoGreedyStepsEqualTheTorchScriptDecoder) {
  Pair p(which());
  ASSERT_EQ(p.native->backend_name(), "native");
  ASSERT_EQ(p.torchscript.backend_name(), "torchscript");
  const int64_t T = 24, steps = 32;
  for (const LarPath path : {LarPath::kAugmented, LarPath::kAdditiveMask}) {
    SCOPED_TRACE(path == LarPath::kAugmented ? "augmented" : "additive mask");
    LarSettings lar;
    lar.path = path;
    lar.layer_scale.assign(static_cast<size_t>(p.bundle.manifest.text.num_layers), 1.0f);
    lar.layer_scale.back() = 0.5f;
    const Inputs in = inputs(p.bundle, T);
    const torch::Tensor e_ts = p.torchscript.embed(in.ids), e_nat = p.native->embed(in.ids);
    EXPECT_TRUE(torch::equal(e_ts, e_nat));
    KvCache c_ts = p.torchscript.make_cache(1, T + steps), c_nat = p.native->make_cache(1, T + steps);
    torch::Tensor l_ts = p.torchscript.forward(e_ts, in.positions, in.log_bias, c_ts, false, lar);
    torch::Tensor l_nat = p.native->forward(e_nat, in.positions, in.log_bias, c_nat, false, lar);
    ASSERT_EQ(l_nat.sizes(), l_ts.sizes());
    EXPECT_LE(max_rel_error(l_nat, l_ts), 1e-5);
    // the caches hold the same augmented rows, bias channel and padding included
    EXPECT_LE(max_rel_error(c_nat.keys(), c_ts.keys()), 1e-5);
    EXPECT_LE(max_rel_error(c_nat.values(), c_ts.values()), 1e-5);

    std::vector<int64_t> tokens_ts, tokens_nat;
    int64_t next_ts = l_ts[0][-1].argmax().item<int64_t>(), next_nat = l_nat[0][-1].argmax().item<int64_t>();
    for (int64_t s = 0; s < steps; ++s) {
      tokens_ts.push_back(next_ts);
      tokens_nat.push_back(next_nat);
      const Inputs step = inputs(p.bundle, 1, T + s);
      l_ts = p.torchscript.forward(p.torchscript.embed(torch::full({1, 1}, next_ts, torch::kLong)), step.positions,
                                   torch::zeros({1, 1}), c_ts, true, lar);
      l_nat = p.native->forward(p.native->embed(torch::full({1, 1}, next_nat, torch::kLong)), step.positions,
                                torch::zeros({1, 1}), c_nat, true, lar);
      EXPECT_LE(max_rel_error(l_nat, l_ts), 1e-5) << "step " << s;
      next_ts = l_ts[0][-1].argmax().item<int64_t>();
      next_nat = l_nat[0][-1].argmax().item<int64_t>();
    }
    EXPECT_EQ(tokens_nat, tokens_ts);
  }
}

TEST_P(NativeDecoder, LayerRangesAndAttentionLogitsEqualTheTorchScriptDecoder) {
  Pair p(which());
  const int64_t T = 17, L = p.bundle.manifest.text.num_layers;
  ASSERT_GE(L, 2);
  const Inputs in = inputs(p.bundle, T);
  const torch::Tensor x = p.torchscript.embed(in.ids);
  for (const LarPath path : {LarPath::kAugmented, LarPath::kAdditiveMask}) {
    LarSettings lar;
    lar.path = path;
    KvCache c_ts = p.torchscript.make_cache(1, T), c_nat = p.native->make_cache(1, T);
    auto [h_ts, a_ts] = p.torchscript.run_range(x, in.positions, in.log_bias, c_ts, 0, 1, true, lar);
    auto [h_nat, a_nat] = p.native->run_range(x, in.positions, in.log_bias, c_nat, 0, 1, true, lar);
    EXPECT_LE(max_rel_error(h_nat, h_ts), 1e-5);
    ASSERT_EQ(a_nat.sizes(), a_ts.sizes());
    EXPECT_LE(max_rel_error(a_nat, a_ts), 1e-5);
    auto [g_ts, unused_ts] = p.torchscript.run_range(h_ts, in.positions, in.log_bias, c_ts, 1, L, false, lar);
    auto [g_nat, unused_nat] = p.native->run_range(h_nat, in.positions, in.log_bias, c_nat, 1, L, false, lar);
    EXPECT_FALSE(unused_nat.defined());
    EXPECT_LE(max_rel_error(p.native->final_norm(g_nat), p.torchscript.final_norm(g_ts)), 1e-5);
    EXPECT_LE(max_rel_error(p.native->logits(g_nat, true), p.torchscript.logits(g_ts, true)), 1e-5);

    KvCache d_ts = p.torchscript.make_cache(1, T), d_nat = p.native->make_cache(1, T);
    auto [f_ts, fa_ts] = p.torchscript.forward_with_attention(x, in.positions, in.log_bias, d_ts, lar);
    auto [f_nat, fa_nat] = p.native->forward_with_attention(x, in.positions, in.log_bias, d_nat, lar);
    EXPECT_LE(max_rel_error(f_nat, f_ts), 1e-5);
    ASSERT_EQ(fa_nat.sizes(), fa_ts.sizes());
    EXPECT_LE(max_rel_error(fa_nat, fa_ts), 1e-5);
  }
}

// bf16 with the runtime's CPU routing (era::gemv for decode steps, widened prefill where this CPU
// lacks bf16 arithmetic, era::widened_attention's decode kernel): the same kernels in the same
// order as the TorchScript modules run them after apply_cpu_matmul.
TEST_P(NativeDecoder, Bfloat16WithTheCpuRoutingEqualsTheTorchScriptDecoder) {
  Pair p(which(), torch::kBFloat16);
  const int64_t T = 20;
  const Inputs in = inputs(p.bundle, T);
  KvCache c_ts = p.torchscript.make_cache(1, T + 4), c_nat = p.native->make_cache(1, T + 4);
  torch::Tensor l_ts = p.torchscript.forward(p.torchscript.embed(in.ids), in.positions, in.log_bias, c_ts, true);
  torch::Tensor l_nat = p.native->forward(p.native->embed(in.ids), in.positions, in.log_bias, c_nat, true);
  EXPECT_LE(max_rel_error(l_nat, l_ts), 1e-5);
  for (int64_t s = 0; s < 4; ++s) {
    const Inputs step = inputs(p.bundle, 1, T + s);
    const torch::Tensor id = l_ts[0][-1].argmax().reshape({1, 1});
    l_ts = p.torchscript.forward(p.torchscript.embed(id), step.positions, torch::zeros({1, 1}), c_ts, true);
    l_nat = p.native->forward(p.native->embed(id), step.positions, torch::zeros({1, 1}), c_nat, true);
    EXPECT_LE(max_rel_error(l_nat, l_ts), 1e-5) << "step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, NativeDecoder, ::testing::Values("llama", "qwen2"),
                         [](const auto& info) { return info.param; });

TEST(NativeDecoderSession, TheSameAnswersAsTheBundlesDecoder) {
  Request request;
  request.images = {test::source_dir() + "/tests/data/sample.png"};
  request.prompt = "What is in the image?";
  request.max_new_tokens = 32;
  request.stop_at_eos = false;
  request.reduction.method = "era";
  request.reduction.tokens = 64;
  Session bundle_decoder = Session::open(test::bundle_dir());
  SessionOptions native_options;
  native_options.hf_weights = test::checkpoint_dir();
  Session native = Session::open(test::bundle_dir(), native_options);
  EXPECT_EQ(bundle_decoder.info().decoder, "torchscript");
  EXPECT_EQ(native.info().decoder, "native");
  const Result want = bundle_decoder.generate(request), got = native.generate(request);
  EXPECT_EQ(got.tokens.size(), 32u);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
}

TEST(NativeDecoderSession, WeightsOfAnotherShapeOrNoneAreRefusedNamingTheFileAndTensor) {
  // tiny-other: a LLaMA of another width, a whole HF folder of its own
  const std::string other = test::open_refusal(test::bundle_dir(), test::testdata_dir() + "/tiny-other");
  EXPECT_NE(other.find("tiny-other/model.safetensors: tensor 'language_model.model.embed_tokens.weight' has shape"),
            std::string::npos)
      << other;
  const std::string missing = test::open_refusal(test::bundle_dir(), test::testdata_dir() + "/no-such-folder");
  EXPECT_NE(missing.find("no-such-folder is not a folder"), std::string::npos) << missing;
  const std::string empty_dir = test::scratch_dir_for_this_test();
  fs::create_directories(empty_dir);
  EXPECT_NE(test::open_refusal(test::bundle_dir(), empty_dir).find("no weights"), std::string::npos);
  // the Qwen2 decoder's folder is tied: without config.json saying so, the head is missing
  const std::string untied = test::scratch_dir_for_this_test() + "_untied";
  fs::remove_all(untied);
  fs::create_directories(untied);
  fs::copy_file(qwen2().weights + "/model.safetensors", untied + "/model.safetensors");
  const std::string head = test::open_refusal(qwen2().bundle, untied);
  EXPECT_NE(head.find("no lm_head.weight, and config.json does not tie the embeddings"), std::string::npos) << head;
}

}  // namespace
}  // namespace era
