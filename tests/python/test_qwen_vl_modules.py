#!/usr/bin/env python3
"""Qwen2.5-VL: era's modules against transformers' own model, and the export.

    PYTHONPATH=tools:tests/python .venv-torch2/bin/python tests/python/test_qwen_vl_modules.py
    PYTHONPATH=tools:tests/python /usr/bin/python3 tests/python/test_qwen_vl_modules.py --script-only

Full mode (needs transformers): a tiny random Qwen2.5-VL made and saved by transformers
(era_tools.make_tiny_qwen_vl), loaded by era's checkpoint reader, and
  - QwenVisionTower + Projector == Qwen2_5_VisionTransformerPretrainedModel's pooler_output
    (max relative error <= 1e-5 in float32) for single images, several items, a t=2 video grid
    and grids with padded / several windows; mean_probs sums to t per item; chunked saliency ==
    one-chunk saliency;
  - the decoder with [B,T,3] positions == the Qwen2.5-VL text model + lm_head on the same
    inputs_embeds / position_ids (<= 1e-5), and [B,T] positions == [B,T,3] with equal axes;
  - scripted == eager (vision, projector, decoder);
  - the exported bundle's manifest; both weight-name layouts; bad folders give CheckpointError.
--script-only (no transformers, e.g. Debian's torch 1.13): random tiny modules scripted and run,
scripted == eager, the window index against a direct re-derivation.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import types

import torch

from era_tools import llava_model as lm
from era_tools.qwen_vl_model import QwenVisionTower, vision_window_index
from era_tools.torch_versions import quiet_deprecation

GRIDS = [
    [[1, 4, 6]],                       # one window, padded
    [[1, 8, 4], [1, 10, 18]],          # two items; 3 x 3 windows, partial on both axes
    [[2, 10, 18]],                     # a video: two temporal slices (own attention segments)
    [[1, 16, 16]],                     # exactly 2 x 2 windows (pad = a whole empty window)
    [[1, 4, 6], [2, 6, 8], [1, 2, 2]],  # image, video, the smallest image
]
REL_TOL = 1e-5


def rel_err(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))


def check(name, err, tol=REL_TOL):
    status = "ok" if err <= tol else "FAILED"
    print(f"  {name:<52} max rel err {err:.3g} (tol {tol:g}): {status}")
    if err > tol:
        raise SystemExit(f"test_qwen_vl_modules: {name}: {err:.3g} > {tol:g}")


def patches_for(grid, dim, seed):
    g = torch.Generator().manual_seed(seed)
    n = sum(t * h * w for t, h, w in grid)
    return torch.randn(n, dim, generator=g), torch.tensor(grid, dtype=torch.long)


def window_index_direct(grid, merge, units):
    """The window order re-derived directly: per item and slice, windows in raster order, the
    merge units of a window in raster order."""
    order, cu, off = [], [0], 0
    for t, h, w in grid:
        lh, lw = h // merge, w // merge
        for s in range(t):
            for wy in range(0, lh, units):
                for wx in range(0, lw, units):
                    n = 0
                    for y in range(wy, min(wy + units, lh)):
                        for x in range(wx, min(wx + units, lw)):
                            order.append(off + s * lh * lw + y * lw + x)
                            n += 1
                    cu.append(cu[-1] + n * merge * merge)
        off += t * lh * lw
    return order, cu


def check_window_index():
    for grid in GRIDS + [[[1, 30, 2]], [[3, 2, 40]]]:
        idx, cu = vision_window_index(torch.tensor(grid), 2, 4)
        want_idx, want_cu = window_index_direct(grid, 2, 4)
        if idx.tolist() != want_idx or cu != want_cu:
            raise SystemExit(f"test_qwen_vl_modules: window index for {grid} differs")
    print("  window index / cu_window_seqlens == direct derivation: ok")


def random_vision_cfg():
    return types.SimpleNamespace(hidden_size=32, intermediate_size=64, num_layers=4, num_heads=2,
                                 patch_size=14, temporal_patch_size=2, spatial_merge_size=2,
                                 window_size=112, fullatt_block_indexes=[1, 3], num_channels=3,
                                 rope_theta=10000.0)


def random_text_cfg():
    return types.SimpleNamespace(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                                 num_kv_heads=2, head_dim=16, cache_head_dim=24, vocab_size=300,
                                 rms_norm_eps=1e-6, rope_theta=1e6, qkv_bias=True,
                                 mrope_section=[2, 3, 3])


def randomize(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.1 if p.dim() >= 2 else 0.02)
                    + (1.0 if "norm" in name or "ln_q" in name else 0.0))
    return module.eval()


def mrope_positions(T, seed=0):
    """[1, T, 3]: a text run, a 3 x 4 'image' block (t constant, h / w varying), text again."""
    pos = torch.zeros(T, 3, dtype=torch.long)
    p = 0
    for i in range(min(3, T)):
        pos[i] = p
        p += 1
    k, start = 3, p
    for y in range(3):
        for x in range(4):
            if k < T:
                pos[k] = torch.tensor([start, start + y, start + x])
                k += 1
    p = start + 4
    while k < T:
        pos[k] = p
        p += 1
        k += 1
    return pos.unsqueeze(0)


def run_decoder(dec, embeds, positions):
    """Full prefill logits [1,T,V] through the exported (cached, LAR) forward, no bias."""
    T = embeds.shape[1]
    k_cache, v_cache = dec.new_cache(1, T + 2) if hasattr(dec, "new_cache") else (None, None)
    bias = torch.zeros(1, T)
    return dec(embeds, positions, 0, bias, k_cache, v_cache, torch.ones(dec.num_layers), 0, False)


def script_checks(vision, projector, decoder):
    """scripted == eager on a few grids and a [B,T,3] / [B,T] decoder pass."""
    with quiet_deprecation():
        sv, sp, sd = torch.jit.script(vision), torch.jit.script(projector), torch.jit.script(decoder)
    dim = vision.patch_embed.in_channels * vision.patch_embed.temporal_patch_size * 14 * 14
    with torch.no_grad():
        for grid in GRIDS[1:3]:
            patches, g = patches_for(grid, dim, 7)
            ref, got = vision(patches, g), sv(patches, g)
            check(f"scripted vision {grid}", max(rel_err(a, b) if b.numel() else 0.0
                                               for a, b in zip(got, ref)), 1e-6)
            check(f"scripted projector {grid}", rel_err(sp(ref[0]), projector(ref[0])), 1e-6)
        T = 20
        embeds = torch.randn(1, T, decoder.embed_tokens.weight.shape[1])
        for pos in (mrope_positions(T), torch.arange(T).unsqueeze(0)):
            k1, v1 = decoder.new_cache(1, T)
            k2, v2 = decoder.new_cache(1, T)
            args = (0, torch.zeros(1, T))
            ref = decoder(embeds, pos, *args, k1, v1, torch.ones(decoder.num_layers), 0, False)
            got = sd(embeds, pos, *args, k2, v2, torch.ones(decoder.num_layers), 0, False)
            check(f"scripted decoder positions {list(pos.shape)}", rel_err(got, ref), 1e-6)
            ref, _ = decoder.run_range(embeds, pos, 0, torch.zeros(1, T), k1, v1,
                                       torch.ones(decoder.num_layers), 1, 0, decoder.num_layers, True)
            got, _ = sd.run_range(embeds, pos, 0, torch.zeros(1, T), k2, v2,
                                  torch.ones(decoder.num_layers), 1, 0, decoder.num_layers, True)
            check(f"scripted run_range positions {list(pos.shape)}", rel_err(got, ref), 1e-6)
    return sv, sp, sd


def script_only():
    """No transformers: random modules, scripted == eager (torch 1.13 and 2.x)."""
    print(f"test_qwen_vl_modules --script-only (torch {torch.__version__})")
    check_window_index()
    vision = randomize(QwenVisionTower(random_vision_cfg()), 1)
    projector = randomize(lm.Projector(128, 64, hidden_features=128), 2)
    decoder = randomize(lm.LlamaDecoder(random_text_cfg(), attention="math"), 3)
    script_checks(vision, projector, decoder)
    # [B,T] positions == [B,T,3] with equal axes
    T = 12
    e = torch.randn(1, T, 64)
    pos2 = torch.arange(T).unsqueeze(0)
    with torch.no_grad():
        a = run_decoder(decoder, e, pos2)
        b = run_decoder(decoder, e, pos2.unsqueeze(-1).expand(1, T, 3).contiguous())
    check("decoder [B,T] == [B,T,3] equal axes", rel_err(a, b), 0.0)
    with torch.no_grad():
        patches, g = patches_for(GRIDS[4], 1176, 3)
        out = vision(patches, g)
    want = float(sum(t for t, _, _ in GRIDS[4]))
    check("mean_probs total == sum of t", abs(float(out[4].sum()) / vision.num_heads - want) / want, 1e-5)
    print("test_qwen_vl_modules --script-only: OK")


# ------------------------------------------------------------------------------------------------
# full mode (transformers)

def hf_model(folder):
    from era_tools.make_tiny_qwen_vl import build
    model, processor, tok = build(seed=11)
    model.set_attn_implementation("eager")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return model


def check_vision(model, ckpt):
    vision = lm.build_vision(copy.copy(ckpt))
    projector = lm.build_projector(copy.copy(ckpt))
    dim = ckpt.config.vision.patch_dim
    with torch.no_grad():
        for k, grid in enumerate(GRIDS):
            patches, g = patches_for(grid, dim, 100 + k)
            ref = model.model.visual(patches, grid_thw=g).pooler_output
            out = vision(patches, g)
            got = projector(out[0])[0]
            check(f"vision + projector vs HF {grid}", rel_err(got, ref))
            n = [t * h * w // 4 for t, h, w in grid]
            sums = torch.split(out[4][0], n, dim=1)
            for (t, _, _), s in zip(grid, sums):
                err = float((s.sum(dim=1) - t).abs().max()) / t
                check(f"  mean_probs sums to t={t}", err, 1e-5)
            if out[3].shape != (1, vision.num_heads, sum(n)) or out[1].shape != (1, vision.num_heads, 0):
                raise SystemExit(f"test_qwen_vl_modules: saliency shapes {out[3].shape} {out[1].shape}")
            # chunked saliency == one chunk
            last = vision.blocks[-1].attn
            last.saliency_chunk = 5
            out5 = vision(patches, g)
            last.saliency_chunk = 1024
            check("  saliency chunk 5 == chunk 1024",
                  max(rel_err(out5[i], out[i]) for i in (0, 3, 4)), 1e-6)
    return vision, projector


def check_decoder(model, ckpt):
    dec = lm.build_decoder(copy.copy(ckpt), attention="math")
    T = 24
    g = torch.Generator().manual_seed(5)
    embeds = torch.randn(1, T, ckpt.config.text.hidden_size, generator=g)
    pos = mrope_positions(T)
    with torch.no_grad():
        hidden = model.model.language_model(inputs_embeds=embeds,
                                            position_ids=pos.permute(2, 0, 1)).last_hidden_state
        ref = model.lm_head(hidden).float()
        got = run_decoder(dec, embeds, pos)
        check("decoder [1,T,3] positions vs HF text model + lm_head", rel_err(got, ref))
        exp = dec.forward_explicit(embeds, pos, torch.zeros(1, T))
        check("explicit decoder [1,T,3] vs HF", rel_err(exp, ref))
        # the sdpa decoder too
        sdpa = lm.build_decoder(copy.copy(ckpt), attention="auto")
        check("sdpa decoder [1,T,3] vs HF", rel_err(run_decoder(sdpa, embeds, pos), ref))
        # text-only positions: [B,T] == HF's default (all three axes equal)
        hidden = model.model.language_model(inputs_embeds=embeds,
                                            position_ids=torch.arange(T).unsqueeze(0)).last_hidden_state
        check("decoder [1,T] positions vs HF", rel_err(run_decoder(dec, embeds, torch.arange(T).unsqueeze(0)),
                                                      model.lm_head(hidden).float()))
    return dec


def check_manifest(folder, tmp):
    from era_tools import export_llava
    bundle = os.path.join(tmp, "bundle")
    if export_llava.main(["--checkpoint", folder, "--out", bundle]) != 0:
        raise SystemExit("test_qwen_vl_modules: export failed")
    with open(os.path.join(bundle, "manifest.json")) as f:
        m = json.load(f)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    v = cfg["vision_config"]
    want = {
        ("arch",): "qwen2.5-vl", ("exported_with", "decoder_api"): 2,
        ("vision", "image_size"): 28, ("vision", "patch_size"): 14, ("vision", "num_patches"): 4,
        ("vision", "hidden_size"): v["hidden_size"], ("vision", "num_layers"): v["depth"],
        ("vision", "has_cls"): False, ("vision", "feature_layers"): [-1],
        ("vision", "layers_run"): v["depth"], ("vision", "select_strategy"): "full",
        ("vision", "tokens_per_crop"): 1, ("vision", "window_size"): 112,
        ("vision", "fullatt_block_indexes"): v["fullatt_block_indexes"],
        ("vision", "saliency_layer"): v["depth"] - 1, ("vision", "tokens_per_second"): 2,
        ("vision", "temporal_patch_size"): 2, ("vision", "spatial_merge_size"): 2,
        ("projector", "in_features"): 4 * v["hidden_size"],
        ("projector", "hidden_features"): 4 * v["hidden_size"],
        ("projector", "out_features"): cfg["text_config"]["hidden_size"],
        ("text", "mrope_section"): [2, 3, 3], ("text", "head_dim"): 16,
        ("tokens", "bos_id"): -1, ("tokens", "image_token_id"): cfg["image_token_id"],
        ("tokens", "video_token_id"): cfg["video_token_id"],
        ("tokens", "vision_start_id"): cfg["vision_start_token_id"],
        ("tokens", "vision_end_id"): cfg["vision_end_token_id"],
        ("image", "aspect_ratio"): "native", ("image", "min_pixels"): 3136,
        ("image", "max_pixels"): 1003520, ("image", "resize_arithmetic"): "torch",
        ("image", "merge_size"): 2, ("image", "temporal_patch_size"): 2,
        ("video", "min_pixels"): 100352, ("video", "max_pixels"): 602112, ("video", "fps"): 2.0,
        ("video", "resize_arithmetic"): "torch", ("video", "pool_stride"): 1,
        ("prompt", "template"): "chatml", ("prompt", "system"): "You are a helpful assistant.",
        ("prompt", "video_placeholder"): "<video>",
    }
    for keys, value in want.items():
        got = m
        for k in keys:
            got = got[k]
        if got != value:
            raise SystemExit(f"test_qwen_vl_modules: manifest {'.'.join(keys)} = {got!r}, want {value!r}")
    im_end = next(t["id"] for t in m["tokens"]["added_tokens"] if t["content"] == "<|im_end|>")
    if im_end not in m["tokens"]["stop_ids"]:
        raise SystemExit("test_qwen_vl_modules: <|im_end|> not among stop_ids")
    print(f"  manifest: {len(want)} fields: ok")


def rewrite(folder, dest, rename=None, drop=(), config=None, files=None):
    """A copy of the checkpoint with tensors renamed / dropped and config.json edited."""
    from era_tools.safetensors_io import load_weights_folder, save_file
    shutil.copytree(folder, dest)
    tensors = load_weights_folder(folder)
    out = {}
    for name, t in tensors.items():
        if any(name.startswith(d) for d in drop):
            continue
        out[rename(name) if rename else name] = t.contiguous()
    save_file(out, os.path.join(dest, "model.safetensors"), metadata={"format": "pt"})
    if config:
        with open(os.path.join(dest, "config.json")) as f:
            cfg = json.load(f)
        config(cfg)
        with open(os.path.join(dest, "config.json"), "w") as f:
            json.dump(cfg, f)
    for name, edit in (files or {}).items():
        path = os.path.join(dest, name)
        with open(path) as f:
            obj = json.load(f)
        edit(obj)
        with open(path, "w") as f:
            json.dump(obj, f)
    return dest


def check_layouts_and_errors(folder, tmp, ckpt):
    from era_tools.hf_checkpoint import CheckpointError, load_checkpoint

    def new_name(n):
        if n.startswith("visual."):
            return "model." + n
        if n.startswith("model."):
            return "model.language_model." + n[len("model."):]
        return n
    alt = rewrite(folder, os.path.join(tmp, "t5layout"), rename=new_name)
    other = load_checkpoint(alt)
    for part in ("vision", "projector", "text"):
        a, b = getattr(ckpt, part), getattr(other, part)
        if sorted(a) != sorted(b) or any(not torch.equal(a[k], b[k]) for k in a):
            raise SystemExit(f"test_qwen_vl_modules: layout transformers>=5 reads {part} differently")
    print(f"  layouts: {ckpt.layout!r} == {other.layout!r}: ok")

    def bad_mrope(c):
        c["text_config"]["rope_parameters"]["mrope_section"] = [2, 3, 4]

    def no_vision_start(c):
        c["vision_start_token_id"] = 5

    def bad_processor(o):
        o["image_processor"]["image_processor_type"] = "CLIPImageProcessor"

    def bad_merge(o):
        o["video_processor"]["merge_size"] = 3

    cases = [
        ("missing tensor", dict(drop=("visual.blocks.2.attn.qkv.bias",)), "visual.blocks.2.attn.qkv.bias"),
        ("untied without lm_head", dict(drop=("lm_head.",), config=lambda c: c.update(tie_word_embeddings=False)
                                         or c["text_config"].update(tie_word_embeddings=False)),
         "lm_head.weight"),
        ("bad mrope_section", dict(config=bad_mrope), "mrope_section"),
        ("vision_start id", dict(config=no_vision_start), "<|vision_start|>"),
        ("image processor type", dict(files={"processor_config.json": bad_processor}),
         "image_processor_type"),
        ("video merge_size", dict(files={"processor_config.json": bad_merge}), "merge_size"),
    ]
    for i, (what, kw, needle) in enumerate(cases):
        dest = rewrite(folder, os.path.join(tmp, f"bad{i}"), **kw)
        try:
            load_checkpoint(dest)
        except CheckpointError as e:
            if needle not in str(e) or (os.path.basename(dest) not in str(e)):
                raise SystemExit(f"test_qwen_vl_modules: {what}: message {e} lacks {needle!r} / the path")
            print(f"  bad folder ({what}): CheckpointError: ok")
            continue
        raise SystemExit(f"test_qwen_vl_modules: {what}: no CheckpointError")
    # tied, released layout without lm_head: the embedding is the head
    dest = rewrite(folder, os.path.join(tmp, "tied"), drop=("lm_head.",))
    tied = load_checkpoint(dest)
    if not torch.equal(tied.text["lm_head.weight"], ckpt.text["embed_tokens.weight"]):
        raise SystemExit("test_qwen_vl_modules: tied lm_head is not the embedding")
    print("  tied embeddings without lm_head: ok")


def full():
    from era_tools.hf_checkpoint import load_checkpoint
    print(f"test_qwen_vl_modules (torch {torch.__version__})")
    check_window_index()
    tmp = tempfile.mkdtemp(prefix="era-qwen-test-")
    try:
        folder = os.path.join(tmp, "ckpt")
        model = hf_model(folder)
        ckpt = load_checkpoint(folder)
        vision, projector = check_vision(model, ckpt)
        decoder = check_decoder(model, ckpt)
        script_checks(vision, projector, decoder)
        check_manifest(folder, tmp)
        check_layouts_and_errors(folder, tmp, ckpt)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_qwen_vl_modules: OK")


def check_refs(case_dir):
    """The exported bundle (reloaded TorchScript) against a make_hf_refs Qwen case: the
    processor's pixel_values / grid_thw and transformers' position_ids in, every prompt position's
    logits and the 32 greedy tokens (decode positions: text position + rope_delta on all three
    axes) out."""
    import numpy as np
    from era_tools import torch_versions
    from references.fixture_files import read_json
    case = read_json(os.path.join(case_dir, "case.json"))
    b = case["bundle"]
    vision = torch_versions.load(os.path.join(b, "vision.pt"))
    projector = torch_versions.load(os.path.join(b, "projector.pt"))
    decoder = torch_versions.load(os.path.join(b, "decoder.pt"))
    L = decoder.num_layers
    for p in case["images"]:
        tok = read_json(os.path.join(p["dir"], "tokens.json"))
        pixels = torch.from_numpy(np.load(os.path.join(p["dir"], "pixel_values.npy")))
        pos = torch.from_numpy(np.load(os.path.join(p["dir"], "position_ids.npy")))
        ref = torch.from_numpy(np.load(os.path.join(p["dir"], "logits.npy")))
        ids = torch.tensor([tok["input_ids"]])
        with torch.no_grad():
            feats = projector(vision(pixels, torch.tensor(tok["grid_thw"]))[0])[0]
            emb = decoder.embed(ids)
            emb[0, ids[0] == tok["image_token_id"]] = feats
            T = ids.shape[1]
            man = read_json(os.path.join(b, "manifest.json"))["text"]
            k = torch.zeros(L, 1, man["num_kv_heads"], T + 40, man["cache_head_dim"])
            v = torch.zeros_like(k)
            logits = decoder(emb, pos.t().unsqueeze(0), 0, torch.zeros(1, T), k, v, torch.ones(L), 0, False)
            greedy, nxt, t = [], int(logits[0, -1].argmax()), T
            for _ in range(len(tok["greedy"])):
                greedy.append(nxt)
                step = torch.full([1, 1], t + tok["rope_delta"], dtype=torch.long)
                out = decoder(decoder.embed(torch.tensor([[nxt]])), step, t, torch.zeros(1, 1), k, v,
                              torch.ones(L), 0, True)
                nxt, t = int(out[0, -1].argmax()), t + 1
        check(f"bundle vs HF logits {os.path.basename(p['dir'])} grid {tok['grid_thw']}",
              rel_err(logits[0], ref))
        if greedy != tok["greedy"]:
            raise SystemExit(f"test_qwen_vl_modules: {p['dir']}: greedy differs: {greedy} vs {tok['greedy']}")
        print("    greedy 32 tokens == HF generate: ok")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--script-only", action="store_true",
                   help="no transformers: scripting and scripted == eager only")
    p.add_argument("--refs", nargs="*", default=[],
                   help="also check make_hf_refs Qwen case folders (DIR/<case>) with the bundle")
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    if args.refs:
        for d in args.refs:
            check_refs(d)
        return 0
    if args.script_only:
        script_only()
        return 0
    try:
        import transformers  # noqa: F401  (only whether it is there)
    except ImportError:
        print("test_qwen_vl_modules: transformers not installed: --script-only checks")
        script_only()
        return 0
    full()
    return 0


if __name__ == "__main__":
    sys.exit(main())
