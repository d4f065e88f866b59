#!/usr/bin/env python3
"""Tests of the Python side: safetensors I/O, the checkpoint loader, the LAR decoder and the
exporter CLI.

    test_exporter.py [--checkpoint DIR] [unittest options]

DIR is a tiny checkpoint from tools/make_tiny_llava.py (one is generated in a temp folder when
--checkpoint is not given). Exits non-zero on failure.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")

from era_tools import llava_model as lm
from era_tools import torch_versions
from era_tools.hf_checkpoint import TextConfig, load_checkpoint, load_config
from era_tools.make_tiny_llava import to_new_layout as new_layout_name
from era_tools.safetensors_io import (SafetensorsError, WeightsFileError, load_file,
                                      load_weights_folder, read_header, save_file)
from references.checkpoint_main import run_unittests
from references.fixture_files import read_json

CHECKPOINT = None  # set in main()
EXPORTER = os.path.join(TOOLS, "export_llava.py")
ATOL = 1e-5


class NotAWeight:
    """Pickled into a .bin file: torch.load(weights_only=True) must refuse to build it."""


def modes():
    return ["math", "sdpa"] if lm.sdpa_available() else ["math"]


def bits(t):
    """Bitwise view (so NaNs compare equal) of any tensor."""
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    if t.dtype.is_floating_point:
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def copy_checkpoint(dst):
    shutil.copytree(CHECKPOINT, dst)
    return dst




# ================================================================================================

class SafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="era-st-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_roundtrip_every_dtype(self):
        g = torch.Generator().manual_seed(0)
        base = torch.randn(3, 5, generator=g) * 100
        base[0, 0], base[0, 1], base[0, 2] = float("inf"), float("-inf"), float("nan")
        tensors = {
            "f64": base.double(), "f32": base, "f16": base.half(), "bf16": base.bfloat16(),
            "i64": torch.randint(-2**62, 2**62, (4, 2), generator=g),
            "i32": torch.randint(-2**31, 2**31 - 1, (7,), generator=g, dtype=torch.int32),
            "i16": torch.randint(-2**15, 2**15 - 1, (2, 2), generator=g, dtype=torch.int16),
            "i8": torch.randint(-128, 127, (9,), generator=g, dtype=torch.int8),
            "u8": torch.randint(0, 255, (2, 3, 4), generator=g, dtype=torch.uint8),
            "bool": torch.rand(5, generator=g) > 0.5,
            "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 4, dtype=torch.float16),
            "noncontig": base.t(),
        }
        path = os.path.join(self.tmp, "all.safetensors")
        save_file(tensors, path, metadata={"format": "pt", "note": "x"})
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        self.assertEqual(n % 8, 0)
        self.assertEqual(header["bf16"]["dtype"], "BF16")
        self.assertEqual(header["bool"]["dtype"], "BOOL")
        loaded, meta = load_file(path)
        self.assertEqual(meta, {"format": "pt", "note": "x"})
        self.assertEqual(set(loaded), set(tensors))
        for name, t in tensors.items():
            with self.subTest(name=name):
                self.assertEqual(loaded[name].dtype, t.dtype)
                self.assertEqual(list(loaded[name].shape), list(t.shape))
                self.assertTrue(torch.equal(bits(loaded[name]), bits(t.contiguous())))
        # loaded tensors are copy-on-write: writing must not change the file
        loaded["f32"].zero_()
        self.assertTrue(torch.equal(bits(load_file(path)[0]["f32"]), bits(base)))

    def test_truncated_and_corrupt_files_name_the_file(self):
        path = os.path.join(self.tmp, "w.safetensors")
        save_file({"a": torch.ones(64), "b": torch.zeros(3, 3)}, path)
        data = read_bytes(path)
        n = int.from_bytes(data[:8], "little")
        cases = {
            "short": data[:5],                       # not even the length prefix
            "header_cut": data[:8 + n // 2],         # header length beyond the file
            "data_cut": data[:-10],                  # last tensor runs past the end
            "garbage_json": data[:8] + b"{not json" + b" " * (n - 9) + data[8 + n:],
            "huge_length": (10**12).to_bytes(8, "little") + data[8:],
        }
        bad_sizes = json.loads(data[8:8 + n])
        bad_sizes["a"]["shape"] = [65]
        bad = json.dumps(bad_sizes).encode()
        cases["size_mismatch"] = (len(bad).to_bytes(8, "little") + bad + data[8 + n:])
        overl = json.loads(data[8:8 + n])
        overl["b"]["data_offsets"] = [0, 36]
        bad = json.dumps(overl).encode()
        cases["overlap"] = (len(bad).to_bytes(8, "little") + bad + data[8 + n:])
        for name, blob in cases.items():
            with self.subTest(case=name):
                p = os.path.join(self.tmp, f"{name}.safetensors")
                with open(p, "wb") as f:
                    f.write(blob)
                with self.assertRaises(SafetensorsError) as cm:
                    load_file(p)
                self.assertIn(p, str(cm.exception))

    def test_sharded_and_bin_folders(self):
        ref = load_weights_folder(CHECKPOINT)
        names = sorted(ref)
        half = len(names) // 2
        shard_dir = os.path.join(self.tmp, "sharded")
        os.makedirs(shard_dir)
        weight_map = {}
        for i, chunk in enumerate((names[:half], names[half:])):
            fname = f"model-0000{i + 1}-of-00002.safetensors"
            save_file({k: ref[k] for k in chunk}, os.path.join(shard_dir, fname))
            weight_map.update({k: fname for k in chunk})
        with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
        got = load_weights_folder(shard_dir)
        self.assertEqual(set(got), set(ref))
        self.assertTrue(all(torch.equal(got[k], ref[k]) for k in ref))

        os.remove(os.path.join(shard_dir, "model-00002-of-00002.safetensors"))
        with self.assertRaises(WeightsFileError) as cm:
            load_weights_folder(shard_dir)
        self.assertIn("model-00002-of-00002.safetensors", str(cm.exception))

        bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(bin_dir)
        torch.save({k: v.clone() for k, v in ref.items()},
                   os.path.join(bin_dir, "pytorch_model.bin"))
        got = load_weights_folder(bin_dir)
        self.assertTrue(all(torch.equal(got[k], ref[k]) for k in ref))

        evil_dir = os.path.join(self.tmp, "evil")
        os.makedirs(evil_dir)
        torch.save({"x": NotAWeight()}, os.path.join(evil_dir, "pytorch_model.bin"))
        with self.assertRaises(WeightsFileError) as cm:
            load_weights_folder(evil_dir)
        self.assertIn("weights_only", str(cm.exception))


# ================================================================================================

class DecoderAttentionTest(unittest.TestCase):
    """The exported (scripted) cache + augmented-key path against the explicit formula."""

    @classmethod
    def setUpClass(cls):
        cls.ckpt = load_checkpoint(CHECKPOINT)
        cls.explicit = lm.build_decoder(cls.ckpt, torch.float32, "explicit")
        cls.scripted = {m: torch_versions.script(lm.build_decoder(cls.ckpt, torch.float32, m))
                        for m in modes()}

    def inputs(self, decoder_cfg, B, T, seed):
        g = torch.Generator().manual_seed(seed)
        embeds = torch.randn(B, T, decoder_cfg.hidden_size, generator=g) * 0.5
        bias = torch.rand(B, T, generator=g) * math.log(6.0)
        bias[:, :2] = 0.0  # text keys carry no bias
        pos = torch.arange(T).unsqueeze(0).expand(B, T)
        return embeds, pos, bias

    def run_cached(self, scripted, cfg, embeds, pos, bias, scales, lar_path, T0, S_max=16):
        """Prefill T0 tokens at cache_pos 0 (all logits), one decode step (T == 1, last_only),
        then the rest as a chunk after the cache (cache_pos > 0, T > 1, all logits).
        -> (prefill, step [B,1,V], chunk, k_cache, v_cache)."""
        B = embeds.shape[0]
        shape = (cfg.num_layers, B, cfg.num_kv_heads, S_max, cfg.cache_head_dim)
        kc, vc = torch.zeros(shape), torch.zeros(shape)
        with torch.no_grad():
            pre = scripted(embeds[:, :T0], pos[:, :T0], 0, bias[:, :T0], kc, vc, scales,
                           lar_path, False)
            step = scripted(embeds[:, T0:T0 + 1], pos[:, T0:T0 + 1], T0, bias[:, T0:T0 + 1],
                            kc, vc, scales, lar_path, True)
            chunk = scripted(embeds[:, T0 + 1:], pos[:, T0 + 1:], T0 + 1, bias[:, T0 + 1:],
                             kc, vc, scales, lar_path, False)
        return pre, step, chunk, kc, vc

    def check_cached_vs_explicit(self, scripted, explicit, cfg, B=1, seed=0, zero_bias=False,
                                 scales=None, lar_path=0):
        """scales: per-layer LAR multipliers (None: ones, and the explicit reference gets none)."""
        T0, T1, S_max = 9, 3, 16
        T = T0 + 1 + T1
        embeds, pos, bias = self.inputs(cfg, B, T, seed)
        if zero_bias:
            bias.zero_()
        layer_scale = torch.ones(cfg.num_layers) if scales is None else scales
        with torch.no_grad():
            ref = explicit.forward_explicit(embeds, pos, bias, scales)
        pre, step, chunk, kc, vc = self.run_cached(scripted, cfg, embeds, pos, bias, layer_scale,
                                                   lar_path, T0, S_max)
        # prefill: cache_pos 0, T > 1, all logits
        self.assertEqual(pre.dtype, torch.float32)
        self.assertLessEqual(float((pre - ref[:, :T0]).abs().max()), ATOL)
        # one decode step: T == 1 at cache_pos T0, last_only
        self.assertEqual(list(step.shape), [B, 1, cfg.vocab_size])
        self.assertLessEqual(float((step[:, 0] - ref[:, T0]).abs().max()), ATOL)
        # a chunk after the cache (cache_pos > 0, T > 1: the masked path)
        self.assertLessEqual(float((chunk - ref[:, T0 + 1:]).abs().max()), ATOL)
        # the cache holds K~ = [K, sqrt(d) scale_l log_b, 0..] and V~ = [V, 0..]; with scale 1
        # the bias channel is bit for bit what the single-scale decoder wrote (sqrt(d) log_b)
        d = cfg.head_dim
        col = kc[:, :, :, :T, d]
        if scales is None:
            want = (bias * math.sqrt(d))[None, :, None, :].expand_as(col)
            self.assertTrue(torch.equal(col, want))
        else:
            want = (bias[None] * layer_scale[:, None, None] * math.sqrt(d))[:, :, None, :]
            self.assertLessEqual(float((col - want.expand_as(col)).abs().max()), 1e-5)
        self.assertEqual(float(kc[..., d + 1:].abs().max()), 0.0)
        self.assertEqual(float(vc[..., d:].abs().max()), 0.0)
        self.assertEqual(float(kc[:, :, :, T:].abs().max()), 0.0)  # nothing written past T

    def test_checkpoint_decoder_matches_explicit(self):
        for mode, scripted in self.scripted.items():
            for lar_path in (0, 1):
                with self.subTest(mode=mode, lar_path=lar_path):
                    self.check_cached_vs_explicit(scripted, self.explicit,
                                                  self.ckpt.config.text, lar_path=lar_path)

    def random_scales(self, cfg, seed):
        g = torch.Generator().manual_seed(seed)
        scales = torch.rand(cfg.num_layers, generator=g) * 2.0
        scales[0] = 0.0 if cfg.num_layers > 2 else scales[0]
        return scales

    def test_lar_paths_agree(self):
        """Augmented Q~/K~/V~ path == additive-mask path, any per-layer scales, in prefill
        (cache_pos 0), a decode step (T == 1) and a chunk after the cache (cache_pos > 0)."""
        cfg = self.ckpt.config.text
        embeds, pos, bias = self.inputs(cfg, 1, 13, seed=11)
        for mode, scripted in self.scripted.items():
            for seed in (1, 2, 3):
                scales = self.random_scales(cfg, seed)
                with self.subTest(mode=mode, scales=scales.tolist()):
                    aug = self.run_cached(scripted, cfg, embeds, pos, bias, scales, 0, 9)
                    msk = self.run_cached(scripted, cfg, embeds, pos, bias, scales, 1, 9)
                    for what, a, m in zip(("prefill", "decode", "chunk"), aug[:3], msk[:3]):
                        self.assertLessEqual(float((a - m).abs().max()), ATOL, what)
                    # both paths write the same cache: the bias channel and layer 0 bit for bit
                    # (later layers' K/V follow the earlier layers' rounding)
                    d = cfg.head_dim
                    self.assertTrue(torch.equal(aug[3][..., d], msk[3][..., d]))
                    self.assertTrue(torch.equal(aug[3][0], msk[3][0]))
                    self.assertTrue(torch.equal(aug[4][0], msk[4][0]))
                    for a, m in zip(aug[3:], msk[3:]):
                        self.assertLessEqual(float((a - m).abs().max()), ATOL)

    def test_per_layer_scales_match_explicit(self):
        cfg = self.ckpt.config.text
        early = torch.zeros(cfg.num_layers)
        early[0] = 1.0
        for mode, scripted in self.scripted.items():
            for lar_path in (0, 1):
                for scales in (self.random_scales(cfg, 7), early):
                    with self.subTest(mode=mode, lar_path=lar_path, scales=scales.tolist()):
                        self.check_cached_vs_explicit(scripted, self.explicit, cfg,
                                                      scales=scales, lar_path=lar_path)

    def test_unit_and_zero_scales(self):
        """Scales all ones == the single-scale behaviour (the explicit formula with log_b in every
        layer); all zeros == no bias at all, bit for bit."""
        cfg = self.ckpt.config.text
        embeds, pos, bias = self.inputs(cfg, 1, 13, seed=12)
        ones, zeros = torch.ones(cfg.num_layers), torch.zeros(cfg.num_layers)
        with torch.no_grad():
            ref = self.explicit.forward_explicit(embeds, pos, bias)
            ref0 = self.explicit.forward_explicit(embeds, pos, torch.zeros_like(bias))
        for mode, scripted in self.scripted.items():
            for lar_path in (0, 1):
                with self.subTest(mode=mode, lar_path=lar_path):
                    got = self.run_cached(scripted, cfg, embeds, pos, bias, ones, lar_path, 9)
                    self.assertLessEqual(float((got[0] - ref[:, :9]).abs().max()), ATOL)
                    self.assertLessEqual(float((got[2] - ref[:, 10:]).abs().max()), ATOL)
                    off = self.run_cached(scripted, cfg, embeds, pos, bias, zeros, lar_path, 9)
                    plain = self.run_cached(scripted, cfg, embeds, pos, torch.zeros_like(bias),
                                            ones, lar_path, 9)
                    for a, b in zip(off, plain):
                        self.assertTrue(torch.equal(a, b))
                    self.assertLessEqual(float((off[0] - ref0[:, :9]).abs().max()), ATOL)
                    self.assertLessEqual(float((off[2] - ref0[:, 10:]).abs().max()), ATOL)
                    self.assertGreater(float((off[0] - got[0]).abs().max()), 1e-3)  # bias acts

    def test_forward_with_attention(self):
        """Logits == forward(last_only); attention rows == the explicit last-query logits (their
        softmax sums to 1); the cache is written exactly as forward writes it. Cases: prefill
        (cache_pos 0, T > 1), a first single token, a decode step (T == 1, cache_pos > 0) and a
        chunk after the cache (cache_pos > 0, T > 1)."""
        cfg = self.ckpt.config.text
        T0, T = 9, 13
        embeds, pos, bias = self.inputs(cfg, 1, T, seed=13)
        shape = (cfg.num_layers, 1, cfg.num_kv_heads, 16, cfg.cache_head_dim)
        scales = self.random_scales(cfg, 5)
        for mode, scripted in self.scripted.items():
            for lar_path in (0, 1):
                for a, b in ((0, T0), (0, 1), (T0, T0 + 1), (T0, T)):
                    with self.subTest(mode=mode, lar_path=lar_path, new_tokens=(a, b)):
                        kc, vc = torch.zeros(shape), torch.zeros(shape)
                        with torch.no_grad():
                            if a:
                                scripted(embeds[:, :a], pos[:, :a], 0, bias[:, :a], kc, vc,
                                         scales, lar_path, False)
                            k2, v2 = kc.clone(), vc.clone()
                            want = scripted(embeds[:, a:b], pos[:, a:b], a, bias[:, a:b], k2, v2,
                                            scales, lar_path, True)
                            logits, attn = scripted.forward_with_attention(
                                embeds[:, a:b], pos[:, a:b], a, bias[:, a:b], kc, vc, scales,
                                lar_path)
                            _, ref = self.explicit.forward_explicit(
                                embeds[:, :b], pos[:, :b], bias[:, :b], scales, return_attn=True)
                        self.assertEqual(list(logits.shape), [1, 1, cfg.vocab_size])
                        self.assertEqual(list(attn.shape), [cfg.num_layers, 1, cfg.num_heads, b])
                        self.assertEqual(attn.dtype, torch.float32)
                        self.assertLessEqual(float((logits - want).abs().max()), ATOL)
                        self.assertTrue(torch.equal(kc, k2) and torch.equal(vc, v2))
                        p = torch.softmax(attn, -1)
                        self.assertLessEqual(float((p.sum(-1) - 1).abs().max()), 1e-6)
                        self.assertLessEqual(float((attn - ref).abs().max()), ATOL)
                        self.assertLessEqual(float((p - torch.softmax(ref, -1)).abs().max()),
                                             1e-6)

    def test_bad_lar_arguments_are_refused(self):
        cfg = self.ckpt.config.text
        embeds, pos, bias = self.inputs(cfg, 1, 3, seed=1)
        shape = (cfg.num_layers, 1, cfg.num_kv_heads, 4, cfg.cache_head_dim)
        scripted = self.scripted["math"]
        for scales, path, msg in ((torch.ones(cfg.num_layers), 2, "lar_path"),
                                  (torch.ones(cfg.num_layers + 1), 0, "layer_bias_scale"),
                                  (torch.ones(1, cfg.num_layers), 1, "layer_bias_scale")):
            with self.subTest(path=path, scales=list(scales.shape)):
                with self.assertRaisesRegex(Exception, msg):
                    scripted(embeds, pos, 0, bias, torch.zeros(shape), torch.zeros(shape),
                             scales, path, True)

    def test_zero_bias_is_plain_attention(self):
        cfg = self.ckpt.config.text
        g = torch.Generator().manual_seed(3)
        H, d = cfg.num_heads, cfg.head_dim
        for mode, scripted in self.scripted.items():
            for tq, tk, off in ((6, 6, 0), (3, 8, 5), (1, 8, 7), (2, 8, 3), (1, 8, 3)):
                with self.subTest(mode=mode, tq=tq, tk=tk, offset=off):
                    q, k, v = (torch.randn(2, H, t, d, generator=g) for t in (tq, tk, tk))
                    plain = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
                    hidden = torch.arange(tk)[None, :] > torch.arange(tq)[:, None] + off
                    plain = torch.softmax(plain.masked_fill(hidden, float("-inf")), -1) @ v
                    got = scripted.attend(q, k, v, torch.zeros(2, tk), off)
                    self.assertLessEqual(float((got - plain).abs().max()), ATOL)
                    lb = torch.rand(2, tk, generator=g) * math.log(6.0)
                    got = scripted.attend(q, k, v, lb, off)
                    ref = lm.explicit_attention(q, k, v, lb, off)
                    self.assertLessEqual(float((got - ref).abs().max()), ATOL)
        with torch.no_grad():
            self.check_cached_vs_explicit(self.scripted["math"], self.explicit, cfg,
                                          zero_bias=True)

    def test_gqa_and_batch(self):
        cfg = TextConfig(hidden_size=96, intermediate_size=160, num_layers=2, num_heads=6,
                         num_kv_heads=2, head_dim=16, vocab_size=50, max_position_embeddings=64,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
        torch.manual_seed(5)
        explicit = lm.ExplicitLlamaDecoder(cfg).eval()
        with torch.no_grad():
            for p in explicit.parameters():  # RMSNorm weights start at 1: perturb them too
                p.add_(torch.randn_like(p) * 0.05)
        scales = torch.tensor([0.5, 1.7])
        for mode in modes():
            dec = lm.LlamaDecoder(cfg, attention=mode).eval()
            dec.load_state_dict(explicit.state_dict())
            scripted = torch_versions.script(dec)
            for lar_path in (0, 1):
                with self.subTest(mode=mode, lar_path=lar_path):
                    self.check_cached_vs_explicit(scripted, explicit, cfg, B=2, seed=9,
                                                  lar_path=lar_path)
                    self.check_cached_vs_explicit(scripted, explicit, cfg, B=2, seed=9,
                                                  scales=scales, lar_path=lar_path)

    def test_layer_ranges_prune_like_the_mask_reference(self):
        """In-decoder pruning through the scripted run_range (layers < K on everything, layers
        >= K on the kept tokens at their original, gapped positions, a decode step through both
        groups) equals the explicit "mask implementation" (dropped keys hidden from layer K on);
        the cache's post-RoPE keys of layer K-1 equal explicit_signals' (GQA heads repeated)."""
        cfg = TextConfig(hidden_size=96, intermediate_size=160, num_layers=3, num_heads=6,
                         num_kv_heads=2, head_dim=16, vocab_size=50, max_position_embeddings=64,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
        torch.manual_seed(7)
        explicit = lm.ExplicitLlamaDecoder(cfg).eval()
        with torch.no_grad():
            for p in explicit.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        T, K = 12, 2
        embeds, pos, _ = self.inputs(cfg, 1, T + 1, seed=3)
        bias = torch.zeros(1, T + 1)
        kept = torch.tensor([0, 1, 3, 4, 7, 9, 10, 11])  # image tokens 2..8 -> keep 3, 4, 7
        key_kept = torch.zeros(1, T + 1, dtype=torch.bool)
        key_kept[0, kept] = True
        key_kept[0, T] = True  # the decode token
        with torch.no_grad():
            want = explicit.forward_explicit_masked(embeds, pos, bias, K, key_kept)[0]
            _, want_keys, _ = explicit.explicit_signals(embeds[:, :T], pos[:, :T], bias[:, :T],
                                                        K - 1)
        for mode in modes():
            dec = lm.LlamaDecoder(cfg, attention=mode).eval()
            dec.load_state_dict(explicit.state_dict())
            m = torch_versions.script(dec)
            shape = (cfg.num_layers, 1, cfg.num_kv_heads, 16, cfg.cache_head_dim)
            kc, vc = torch.zeros(shape), torch.zeros(shape)
            sc = torch.ones(cfg.num_layers)
            with torch.no_grad():
                low, attn = m.run_range(embeds[:, :T], pos[:, :T], 0, bias[:, :T], kc, vc, sc, 0,
                                        0, K, True)
                high, _ = m.run_range(low[:, kept], pos[:, kept], 0, bias[:, kept], kc, vc, sc, 0,
                                      K, cfg.num_layers, False)
                prefill = m.logits(high, True)[0, 0]
                step_low, _ = m.run_range(embeds[:, T:], pos[:, T:], T, bias[:, T:], kc, vc, sc,
                                          0, 0, K, False)
                step_high, _ = m.run_range(step_low, pos[:, T:], len(kept), bias[:, T:], kc, vc,
                                           sc, 0, K, cfg.num_layers, False)
                step = m.logits(step_high, False)[0, 0]
            with self.subTest(mode=mode):
                self.assertEqual(tuple(attn.shape), (K, 1, cfg.num_heads, T))
                self.assertLess(float((prefill - want[T - 1]).abs().max()), 1e-4)
                self.assertLess(float((step - want[T]).abs().max()), 1e-4)
                cache_keys = kc[K - 1, 0, :, :T, :cfg.head_dim].repeat_interleave(3, dim=0)
                self.assertLess(float((cache_keys - want_keys[0]).abs().max()), 1e-5)
                # and pruning changed the answer (a no-op would pass the checks above otherwise)
                with torch.no_grad():  # no autograd graph (torch 2.x warns converting it to float)
                    full = explicit.forward_explicit(embeds[:, :T], pos[:, :T], bias[:, :T])[0, -1]
                self.assertGreater(float((prefill - full).abs().max()), 1e-3)

    def test_sdpa_branches_eager(self):
        """The SdpaAttention mask / is_causal branches, run eagerly, and the float masks they
        hand to SDPA. On torch >= 2.1 the real scaled_dot_product_attention runs (wrapped to
        record its float masks); on torch < 2.1, which has none, a stand-in with its documented
        semantics does (the scripted sdpa module is covered by the tests above and by
        test_attention_cores.py on torch >= 2.1)."""
        float_masks = []

        def stand_in(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
            s = torch.matmul(q, k.transpose(-1, -2)) * scale
            if is_causal:  # top-left aligned, as torch documents it
                attn_mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
            if attn_mask is not None and attn_mask.dtype == torch.bool:
                s = s.masked_fill(~attn_mask, float("-inf"))
            elif attn_mask is not None:  # a float mask is added to the scaled scores
                s = s + attn_mask
            return torch.softmax(s, -1) @ v

        saved = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
        kernel = saved if lm.sdpa_available() else stand_in

        def recording(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
            if attn_mask is not None and attn_mask.dtype != torch.bool:
                self.assertEqual(attn_mask.dtype, q.dtype)
                float_masks.append(list(attn_mask.shape))
            return kernel(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                          scale=scale)

        cfg = self.ckpt.config.text
        dec = lm.build_decoder(self.ckpt, torch.float32, "math")
        scale = 1.0 / math.sqrt(cfg.head_dim)
        dec.core = lm.SdpaAttention(scale)
        for layer in dec.layers:
            layer.self_attn.core = lm.SdpaAttention(scale)
        torch.nn.functional.scaled_dot_product_attention = recording
        try:
            for lar_path in (0, 1):
                with self.subTest(lar_path=lar_path):
                    self.check_cached_vs_explicit(dec, self.explicit, cfg, lar_path=lar_path)
                    self.check_cached_vs_explicit(dec, self.explicit, cfg,
                                                  scales=self.random_scales(cfg, 4),
                                                  lar_path=lar_path)
            # the mask path hands SDPA [B,1,Tq,Tk] (causal + bias) or [B,1,1,Tk] (decode)
            self.assertIn([1, 1, 9, 9], float_masks)
            self.assertIn([1, 1, 1, 10], float_masks)
            self.assertIn([1, 1, 3, 13], float_masks)
        finally:
            if saved is None:
                del torch.nn.functional.scaled_dot_product_attention
            else:
                torch.nn.functional.scaled_dot_product_attention = saved

    def test_rope_is_neox_rotation(self):
        """rotate_half RoPE == rotating the pairs (i, i + d/2) by pos * theta^(-2i/d)."""
        d, theta = 32, 10000.0
        pos = torch.tensor([[0, 1, 7, 300, 2047]])
        cos, sin = lm.rope_cos_sin(pos, d, theta, torch.float32)
        x = torch.randn(1, 5, d, generator=torch.Generator().manual_seed(1))
        got = x * cos + lm.rotate_half(x) * sin
        ang = pos[0, :, None].double() * theta ** (-torch.arange(0, d, 2).double() / d)
        z = torch.complex(x[0, :, :d // 2].double(), x[0, :, d // 2:].double()) * torch.polar(
            torch.ones_like(ang), ang)
        want = torch.cat([z.real, z.imag], -1).float()
        self.assertLessEqual(float((got[0] - want).abs().max()), 1e-3)  # fp32 angles at pos 2047

    def test_vision_saliency_is_consistent(self):
        vision = lm.build_vision(self.ckpt)
        scripted = torch_versions.script(vision)
        S = self.ckpt.config.vision.image_size
        x = torch.randn(1, 3, S, S, generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            out = vision(x)
            out2 = scripted(x)
        self.assertEqual(len(out), 7)
        f, lg, pr, ml, mp, cls_feature, mean_keys = out
        v = self.ckpt.config.vision
        self.assertEqual(list(f.shape), [1, v.num_patches, v.hidden_size])
        for t in (lg, pr, ml, mp):
            self.assertEqual(list(t.shape), [1, v.num_heads, v.num_patches])
            self.assertEqual(t.dtype, torch.float32)
        self.assertEqual(list(cls_feature.shape), [1, v.hidden_size])
        self.assertEqual(list(mean_keys.shape), [1, v.num_patches + 1, v.hidden_size // v.num_heads])
        self.assertEqual(mean_keys.dtype, torch.float32)
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(out, out2)))
        # probs without the CLS column renormalise to the softmax of the logits row
        self.assertTrue(bool((pr.sum(-1) < 1).all()))
        renorm = pr / pr.sum(-1, keepdim=True)
        self.assertLessEqual(float((renorm - torch.softmax(lg, -1)).abs().max()), 1e-6)

    def test_vision_mean_readout(self):
        """The CLS-free mean readout == an explicit recomputation from the eager attention of the
        feature layer (float64, HF CLIP attention written out by hand)."""
        vision = lm.build_vision(self.ckpt)
        v = self.ckpt.config.vision
        S = v.image_size
        x = torch.randn(2, 3, S, S, generator=torch.Generator().manual_seed(6))
        with torch.no_grad():
            _, cls_logits, cls_probs, mean_logits, mean_probs, cls_feature, mean_keys = vision(x)
            h = vision.pre_layrnorm(vision.embeddings(x))
            for layer in vision.encoder.layers[:-1]:
                h = layer(h, False)[0]
            final = vision.encoder.layers[-1](h, False)[0]  # the feature layer's output, CLS incl.
            attn = vision.encoder.layers[-1].self_attn
            h = vision.encoder.layers[-1].layer_norm1(h).double()
            B, N1, C = h.shape
            H, hd = v.num_heads, C // v.num_heads

            def heads(lin):
                return torch.nn.functional.linear(h, lin.weight.double(), lin.bias.double()) \
                    .view(B, N1, H, hd).transpose(1, 2)

            logits = heads(attn.q_proj) @ heads(attn.k_proj).transpose(-1, -2) / math.sqrt(hd)
            probs = torch.softmax(logits, -1)  # [B, H, N+1 queries, N+1 keys]
        want_ml = torch.stack([logits[:, :, i, 1:] for i in range(1, N1)], 0).mean(0)
        want_mp = torch.stack([probs[:, :, i, 1:] for i in range(1, N1)], 0).mean(0)
        self.assertLessEqual(float((mean_logits.double() - want_ml).abs().max()), 1e-5)
        self.assertLessEqual(float((mean_probs.double() - want_mp).abs().max()), 1e-7)
        self.assertLessEqual(float((cls_logits.double() - logits[:, :, 0, 1:]).abs().max()), 1e-5)
        self.assertLessEqual(float((cls_probs.double() - probs[:, :, 0, 1:]).abs().max()), 1e-7)
        self.assertTrue(bool((mean_probs.sum(-1) < 1).all()))  # the CLS key's share is gone
        self.assertFalse(torch.allclose(mean_logits, cls_logits))  # a different readout
        # VisionZip's inputs: the CLS token's feature and the head-mean keys (CLS included)
        self.assertLessEqual(float((cls_feature - final[:, 0]).abs().max()), 1e-5)
        want_keys = heads(attn.k_proj).mean(1)  # [B, N+1, hd]
        self.assertLessEqual(float((mean_keys.double() - want_keys).abs().max()), 1e-5)


# ================================================================================================

class ExporterCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="era-export-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def export(self, ckpt, out, *extra):
        return subprocess.run([sys.executable, EXPORTER, "--checkpoint", ckpt, "--out", out,
                               *extra], capture_output=True, text=True, timeout=300)

    def assert_rejected(self, ckpt, expect):
        out = os.path.join(self.tmp, "bundle")
        r = self.export(ckpt, out)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertTrue(r.stderr.startswith("export_llava: error: "), r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        for s in expect:
            self.assertIn(s, r.stderr)
        self.assertFalse(os.path.exists(out), "a failed export left a bundle")
        leftovers = [n for n in os.listdir(self.tmp) if n.startswith(".bundle")]
        self.assertEqual(leftovers, [], "a failed export left a temporary folder")

    def test_export_writes_the_bundle(self):
        out = os.path.join(self.tmp, "bundle")
        for attempt in range(2):  # the second run replaces the first bundle
            r = self.export(CHECKPOINT, out, "--name", "tiny-test")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["decoder.pt", "manifest.json",
                                                   "projector.pt", "tokenizer.model",
                                                   "vision.pt"])
        self.assertEqual(sorted(os.listdir(self.tmp)), ["bundle"])
        m = read_json(os.path.join(out, "manifest.json"))
        self.assertEqual(set(m), {"format", "format_version", "arch", "model_name", "dtype",
                                  "exported_with", "files", "vision", "projector", "text",
                                  "tokens", "image", "prompt"})
        self.assertEqual((m["format"], m["format_version"], m["arch"], m["model_name"],
                          m["dtype"]), ("era-bundle", 1, "llava-1.5", "tiny-test", "float32"))
        self.assertEqual(m["vision"]["layers_run"], m["vision"]["num_layers"] - 1)
        self.assertEqual(m["text"]["cache_head_dim"],
                         int(math.ceil((m["text"]["head_dim"] + 1) / 8)) * 8)
        self.assertEqual(m["image"]["pad_color"], [122, 116, 104])
        # the tiny checkpoint ships llava-hf's CLIPImageProcessor: crop, unless --image-mode pad
        self.assertEqual((m["image"]["aspect_ratio"], m["image"]["shortest_edge"],
                          m["image"]["resample"]), ("crop", 336, "bicubic"))
        self.assertEqual(m["tokens"]["image_token_id"], 1000)
        cfg = read_json(os.path.join(CHECKPOINT, "config.json"))
        self.assertEqual(m["text"]["vocab_size"], cfg["text_config"]["vocab_size"])

        self.assertEqual(m["exported_with"]["decoder_api"], 2)
        self.assertEqual(m["exported_with"]["attention"], "sdpa" if lm.sdpa_available() else "math")

        dec = torch_versions.load(os.path.join(out, "decoder.pt"))
        t = m["text"]
        kc = torch.zeros(t["num_layers"], 1, t["num_kv_heads"], 4, t["cache_head_dim"])
        vc = torch.zeros_like(kc)
        emb = dec.embed(torch.tensor([[1, 5, 7]]))
        scales = torch.ones(t["num_layers"])
        logits = dec(emb, torch.arange(3)[None], 0, torch.zeros(1, 3), kc, vc, scales, 0, True)
        self.assertEqual(list(logits.shape), [1, 1, t["vocab_size"]])
        self.assertGreater(float(kc.abs().sum()), 0.0)  # written in place
        kc2, vc2 = torch.zeros_like(kc), torch.zeros_like(vc)
        logits2, attn = dec.forward_with_attention(emb, torch.arange(3)[None], 0,
                                                   torch.zeros(1, 3), kc2, vc2, scales, 1)
        self.assertEqual(list(attn.shape), [t["num_layers"], 1, t["num_heads"], 3])
        self.assertLessEqual(float((logits2 - logits).abs().max()), ATOL)
        vis = torch_versions.load(os.path.join(out, "vision.pt"))
        S = m["vision"]["image_size"]
        self.assertEqual(len(vis(torch.zeros(1, 3, S, S))), 7)

    def test_rejects_wrong_model_type(self):
        ck = copy_checkpoint(os.path.join(self.tmp, "ck"))
        cfg = read_json(os.path.join(ck, "config.json"))
        cfg["model_type"] = "llama"
        cfg["architectures"] = ["LlamaForCausalLM"]
        with open(os.path.join(ck, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        self.assert_rejected(ck, ["config.json", "not a LLaVA"])

    def test_original_llava_checkpoint_names_the_conversion(self):
        # liuhaotian/llava-v1.5-7b's config: model_type llava_llama, LlavaLlamaForCausalLM.
        for extra, script in (({}, "convert_llava_weights_to_hf.py"),
                              ({"image_grid_pinpoints": [[336, 672]]}, "convert_llava_next_weights_to_hf.py")):
            ck = copy_checkpoint(os.path.join(self.tmp, "orig" + str(len(extra))))
            cfg = {"model_type": "llava_llama", "architectures": ["LlavaLlamaForCausalLM"],
                   "mm_vision_tower": "openai/clip-vit-large-patch14-336", **extra}
            with open(os.path.join(ck, "config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f)
            self.assert_rejected(ck, ["config.json", "original LLaVA checkpoint", script, "llava-hf"])

    def test_rejects_missing_tensor(self):
        ck = copy_checkpoint(os.path.join(self.tmp, "ck"))
        path = os.path.join(ck, "model.safetensors")
        tensors, meta = load_file(path)
        gone = "language_model.model.layers.1.mlp.up_proj.weight"
        del tensors[gone]
        save_file({k: v.clone() for k, v in tensors.items()}, path, meta)
        self.assert_rejected(ck, [gone, "missing"])

    def test_rejects_wrong_shape(self):
        ck = copy_checkpoint(os.path.join(self.tmp, "ck"))
        path = os.path.join(ck, "model.safetensors")
        tensors, meta = load_file(path)
        name = "multi_modal_projector.linear_1.weight"
        tensors = {k: v.clone() for k, v in tensors.items()}
        tensors[name] = tensors[name][:, :-1].contiguous()
        save_file(tensors, path, meta)
        self.assert_rejected(ck, [name, "expected", "got"])

    def test_rejects_truncated_safetensors(self):
        ck = copy_checkpoint(os.path.join(self.tmp, "ck"))
        path = os.path.join(ck, "model.safetensors")
        os.truncate(path, os.path.getsize(path) - 1000)
        self.assert_rejected(ck, ["model.safetensors", "truncated"])

    def test_rejects_missing_tokenizer_and_folder(self):
        ck = copy_checkpoint(os.path.join(self.tmp, "ck"))
        os.remove(os.path.join(ck, "tokenizer.model"))
        self.assert_rejected(ck, ["tokenizer.model"])
        self.assert_rejected(os.path.join(self.tmp, "does-not-exist"), ["does-not-exist"])


class ConfigDefaultsTest(unittest.TestCase):
    def test_llava_15_7b_hf_config(self):
        """The llava-hf 1.5-7b config.json stores only non-default fields: the rest must come from
        HF's LlamaConfig / CLIPVisionConfig defaults."""
        cfg = {
            "architectures": ["LlavaForConditionalGeneration"], "ignore_index": -100,
            "image_token_index": 32000, "model_type": "llava", "pad_token_id": 32001,
            "projector_hidden_act": "gelu", "tie_word_embeddings": False,
            "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5",
                            "architectures": ["LlamaForCausalLM"],
                            "max_position_embeddings": 4096, "model_type": "llama",
                            "rms_norm_eps": 1e-05, "torch_dtype": "float16", "vocab_size": 32064},
            "torch_dtype": "float16", "transformers_version": "4.36.0.dev0",
            "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
                              "model_type": "clip_vision_model", "num_attention_heads": 16,
                              "num_hidden_layers": 24, "patch_size": 14, "projection_dim": 768,
                              "vocab_size": 32000},
            "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
            "vocab_size": 32064,
        }
        tmp = tempfile.mkdtemp(prefix="era-cfg-")
        self.addCleanup(shutil.rmtree, tmp)
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        c = load_config(tmp)
        t, v = c.text, c.vision
        self.assertEqual((t.hidden_size, t.intermediate_size, t.num_layers, t.num_heads,
                          t.num_kv_heads, t.head_dim, t.cache_head_dim, t.vocab_size,
                          t.max_position_embeddings, t.rms_norm_eps, t.rope_theta),
                         (4096, 11008, 32, 32, 32, 128, 136, 32064, 4096, 1e-5, 10000.0))
        self.assertEqual((v.hidden_size, v.intermediate_size, v.num_layers, v.num_heads,
                          v.image_size, v.patch_size, v.num_patches, v.layers_run,
                          v.layer_norm_eps, v.hidden_act),
                         (1024, 4096, 24, 16, 336, 14, 576, 23, 1e-5, "quick_gelu"))
        self.assertEqual((c.image_token_id, c.pad_token_id), (32000, 32001))


class LayoutTest(unittest.TestCase):
    def test_new_layout_loads_the_same_model(self):
        tmp = tempfile.mkdtemp(prefix="era-layout-")
        self.addCleanup(shutil.rmtree, tmp)
        ck = copy_checkpoint(os.path.join(tmp, "ck"))
        path = os.path.join(ck, "model.safetensors")
        tensors, meta = load_file(path)
        renamed = {new_layout_name(k): v.clone() for k, v in tensors.items()}
        self.assertIn("model.language_model.layers.0.self_attn.q_proj.weight", renamed)
        self.assertIn("lm_head.weight", renamed)
        save_file(renamed, path, meta)
        self.assertIn("model.vision_tower.vision_model.pre_layrnorm.weight", read_header(path)[0])

        old, new = load_checkpoint(CHECKPOINT), load_checkpoint(ck)
        self.assertEqual(old.layout, "llava-hf")
        self.assertEqual(new.layout, "transformers>=4.52")
        for part in ("vision", "projector", "text"):
            a, b = getattr(old, part), getattr(new, part)
            self.assertEqual(set(a), set(b))
            self.assertTrue(all(torch.equal(a[k], b[k]) for k in a), part)
        S = old.config.vision.image_size
        x = torch.randn(1, 3, S, S, generator=torch.Generator().manual_seed(4))
        with torch.no_grad():
            fa = lm.build_projector(old)(lm.build_vision(old)(x)[0])
            fb = lm.build_projector(new)(lm.build_vision(new)(x)[0])
        self.assertTrue(torch.equal(fa, fb))

        # a missing tensor is named in the checkpoint's own layout
        del renamed["model.language_model.norm.weight"]
        save_file(renamed, path, meta)
        r = subprocess.run([sys.executable, EXPORTER, "--checkpoint", ck, "--out",
                            os.path.join(tmp, "b")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("model.language_model.norm.weight", r.stderr)


def use_checkpoint(path):
    global CHECKPOINT
    CHECKPOINT = path


def main():
    return run_unittests("llava-1.5", use_checkpoint)


if __name__ == "__main__":
    sys.exit(main())
