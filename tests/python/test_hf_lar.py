#!/usr/bin/env python3
"""LAR end to end against transformers itself: era's ERA prefill logits must be what
transformers' own LLaMA decoder gives when fed era's reduced sequence with LAR's log b_k as an
additive attention mask.

    test_hf_lar.py --era-infer PATH --hf DIR --scratch DIR [unittest options]

DIR (--hf) is make_hf_refs.py's output; the llava15_gqa case is used: a checkpoint written by
transformers (save_pretrained) and era's export of it. era_infer runs ERA (DEP anchors, BTR
recycling, LAR in every layer with scale 1) at 64 visual tokens on the case's first image and
writes, with --dump-prompt, the decoder's input after reduction (embeddings, positions, log b per
key) and its logits at every prompt position. transformers' LlamaModel (the checkpoint's
language model) then gets inputs_embeds = era's embeddings, position_ids = era's positions and a
4D float mask [1, 1, T, T]: 0 on and below the diagonal plus log b_k on key column k, the dtype's
minimum above it. transformers returns a 4D mask as given (masking_utils: "already prepared 4D
mask ... returned as-is"); eager attention adds it to the scaled logits, SDPA passes it as
attn_mask. That is LAR's definition (softmax(QK^T/sqrt(d) + log b_k)), computed by code era does
not share; era's kernel is the augmented-key path (log b_k as an extra Q/K channel).

Both implementations get the very same embeddings, so this checks the decoder and LAR, not the
reduction (which tests/reduce covers). It is not vacuous: some log b_k are > 0, and without them
the logits move by far more than the tolerance.
"""
import argparse
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np
import torch

from references.fixture_files import read_json

ERA_INFER = HF_DIR = SCRATCH = None  # set in main()
CASE = "llava15_gqa"  # GQA: the bias must reach every query head of a shared key head
VISUAL_TOKENS = 64
TOLERANCE = 1e-4  # max relative error, as tests/model/test_decoder_parity.cpp
# Dropping the bias must move the logits by at least this much: far outside the tolerance.
MIN_BIAS_EFFECT = 100 * TOLERANCE


def max_rel_error(got, want):
    """max |got - want| / max |want|, in float64 (test_decoder_parity.cpp's definition)."""
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def run_era(case, out):
    """era_infer on the case's first image, ERA with LAR at scale 1 in every layer; returns the
    --dump-prompt folder's arrays and prompt.json."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [ERA_INFER, "--model", case["bundle"], "--image", case["images"][0]["png"],
           "--prompt", case["question"], "--method", "era", "--tokens", str(VISUAL_TOKENS),
           "--era-set", "rectify=true", "--era-set", "lar_schedule=all",
           "--device", "cpu", "--dtype", "float32", "--max-new-tokens", "1", "--json",
           "--dump-prompt", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"era_infer failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    dump = {name: np.load(os.path.join(out, name + ".npy"))
            for name in ("embeds", "positions", "key_log_bias", "layer_scales", "prompt_logits")}
    dump["info"] = read_json(os.path.join(out, "prompt.json"))
    return dump


def additive_mask(key_log_bias, dtype):
    """[1, 1, T, T]: query t sees keys <= t with log b_k added; keys > t get dtype's minimum
    (finite, so a row never turns into NaN; exp underflows to exactly 0 either way)."""
    bias = torch.as_tensor(key_log_bias, dtype=dtype)
    T = bias.shape[0]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    mask = torch.where(causal, bias.view(1, T).expand(T, T), torch.tensor(torch.finfo(dtype).min, dtype=dtype))
    return mask.view(1, 1, T, T)


def hf_prompt_logits(model, embeds, positions, mask):
    """Logits [T, V] of the checkpoint's language model + lm_head on era's sequence."""
    with torch.no_grad():
        hidden = model.model.language_model(
            inputs_embeds=torch.as_tensor(embeds).unsqueeze(0),
            position_ids=torch.as_tensor(positions, dtype=torch.long).unsqueeze(0),
            attention_mask=mask, use_cache=False).last_hidden_state
        return model.lm_head(hidden)[0].float()


def load_checkpoint(path, attention):
    from transformers import LlavaForConditionalGeneration
    return LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32,
                                                         attn_implementation=attention).eval()


class HfLar(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.case = read_json(os.path.join(HF_DIR, CASE, "case.json"))
        cls.era = run_era(cls.case, os.path.join(SCRATCH, "prompt"))
        cls.models = {}

    def model(self, attention):
        if attention not in self.models:
            self.models[attention] = load_checkpoint(self.case["checkpoint"], attention)
        return self.models[attention]

    def lar_mask(self):
        return additive_mask(self.era["key_log_bias"], torch.float32)

    def test_dump_is_an_era_prompt_with_recycled_keys(self):
        e, info = self.era, self.era["info"]
        T = e["embeds"].shape[0]
        self.assertEqual(info["method"], "era")
        self.assertEqual(info["visual_tokens"], VISUAL_TOKENS)
        self.assertEqual(info["prompt_tokens"], T)
        self.assertEqual(e["prompt_logits"].shape, (T, info["vocab_size"]))
        self.assertEqual(e["key_log_bias"].shape, (T,))
        np.testing.assert_array_equal(e["positions"], np.arange(T))
        # LAR at scale 1 in every layer: one mask serves every HF layer
        np.testing.assert_array_equal(e["layer_scales"], np.ones(info["layers"], dtype=np.float32))
        # BTR recycled some dropped tokens into anchors (b_k > 1), and only visual keys are biased
        self.assertGreater(float(e["key_log_bias"].max()), 0.1)
        self.assertEqual(info["biased_keys"], int(np.count_nonzero(e["key_log_bias"])))
        self.assertLessEqual(info["biased_keys"], VISUAL_TOKENS)

    def check_parity(self, attention):
        got = hf_prompt_logits(self.model(attention), self.era["embeds"], self.era["positions"],
                               self.lar_mask())
        err = max_rel_error(self.era["prompt_logits"], got)
        print(f"[ measured ] {attention}: era ERA logits vs transformers + log b mask, "
              f"{got.shape[0]} positions: max relative error {err:.3g}")
        self.assertLessEqual(err, TOLERANCE)

    def test_eager_attention_with_log_b_mask_gives_era_logits(self):
        self.check_parity("eager")

    def test_sdpa_attention_with_log_b_mask_gives_era_logits(self):
        self.check_parity("sdpa")

    def test_dropping_the_bias_changes_the_logits(self):
        plain = additive_mask(np.zeros_like(self.era["key_log_bias"]), torch.float32)
        got = hf_prompt_logits(self.model("eager"), self.era["embeds"], self.era["positions"], plain)
        err = max_rel_error(self.era["prompt_logits"], got)
        print(f"[ measured ] eager without log b: max relative error {err:.3g}")
        self.assertGreater(err, MIN_BIAS_EFFECT)


def main():
    global ERA_INFER, HF_DIR, SCRATCH
    p = argparse.ArgumentParser()
    p.add_argument("--era-infer", required=True, help="the era_infer executable")
    p.add_argument("--hf", required=True, help="make_hf_refs.py's output folder")
    p.add_argument("--scratch", required=True, help="folder for era_infer's --dump-prompt")
    args, rest = p.parse_known_args()
    ERA_INFER, HF_DIR, SCRATCH = args.era_infer, args.hf, args.scratch
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
