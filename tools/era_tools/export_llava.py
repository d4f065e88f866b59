"""Export an HF LLaVA-1.5 / LLaVA-NeXT checkpoint folder to an era bundle (BUNDLE_FORMAT.md).

    export_llava.py --checkpoint DIR --out BUNDLE [--dtype float32|float16|bfloat16]
                    [--attention auto|math|sdpa] [--name NAME]

Steps: validate and load the checkpoint (era_tools.hf_checkpoint) -> build the eager modules in
the target dtype -> torch.jit.script and save vision.pt / projector.pt / decoder.pt -> copy
tokenizer.model -> write manifest.json -> reload every saved module with torch.jit.load and
compare it with the eager module on a small random input (every exported method, both LAR kernel
paths), and check that the reloaded decoder's two LAR paths agree.

LLaVA-NeXT (model_type "llava_next", e.g. llava-hf/llava-v1.6-vicuna-7b-hf) gives a bundle with
manifest arch "llava-next", image.aspect_ratio "anyres" and image.grid_pinpoints, and a projector.pt
that also carries the learned `image_newline` [D] as a registered parameter. The vision and decoder
modules are the same as LLaVA-1.5's (the vision tower takes the base crop and the tiles as one
batch).

Everything is written to a temporary folder next to BUNDLE and renamed into place only after the
check passed, so a failed export never leaves a half bundle (an existing bundle is replaced only
on success). User errors (missing folder, not LLaVA, missing / mis-shaped tensors, unreadable
weights, a torch version not in era_tools.torch_versions.EXPORT_TORCH) print
`export_llava: error: <message>` and exit 2; a failed numerical check exits 1.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch

from . import families
from .hf_checkpoint import IMAGE_MODES, CheckpointError, load_checkpoint, with_image_mode
from .int8_weights import INT8_MODULES, INT8_SCHEMES, int8_available, quantize_module
from .llava_model import build_decoder, build_projector, build_vision, resolve_attention
from .prompt_template import TEMPLATES, TemplateError, default_template, prompt_section
from .safetensors_io import WeightsFileError
from . import torch_versions
from .torch_versions import UnsupportedTorch, check_export_torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
FILES = {"vision": "vision.pt", "projector": "projector.pt", "decoder": "decoder.pt",
         "tokenizer": "tokenizer.model"}
# Scripted vs eager run the same kernels, so anything beyond rounding noise is a real bug.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}
# The two LAR kernel paths (augmented key vs additive mask) are different kernels: same maths,
# different rounding.
PATH_TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-2, torch.bfloat16: 1e-1}
# Version of the decoder.pt / vision.pt calling convention (manifest exported_with.decoder_api):
#   1 (no field): forward(embeds, positions, cache_pos, key_log_bias, k_cache, v_cache, last_only),
#                 vision returns 3 tensors
#   2: forward(..., v_cache, layer_bias_scale, lar_path, last_only), forward_with_attention(),
#      vision returns 5 tensors (CLS and mean saliency); bundles exported since VisionZip
#      support return 7 (+ CLS feature, head-mean keys): an additive change, readers accept both
#      and only the VisionZip method needs the two extra outputs
DECODER_API = 2


class ExportError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


class CheckFailed(Exception):
    """The reloaded TorchScript module disagrees with the eager one: exit status 1."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True,
                   help="HF LLaVA-1.5 or LLaVA-NeXT (v1.6) checkpoint folder")
    p.add_argument("--out", required=True, help="bundle folder to create (replaced if a bundle)")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32")
    p.add_argument("--attention", choices=["auto", "math", "sdpa"], default="auto",
                   help="decoder attention kernel: auto = sdpa on torch >= 2.1, else math")
    p.add_argument("--int8", choices=list(INT8_MODULES), default=None,
                   help="store Linear weights as int8 with per-channel scales "
                        "(tools/era_tools/int8_weights.py): 'decoder' = the language model's, "
                        "'all' = the vision tower's and projector's too")
    p.add_argument("--int8-scheme", choices=list(INT8_SCHEMES), default=INT8_SCHEMES[0],
                   help="how int8 weights run: 'weight-only' = era's int8 kernel, activations "
                        "unquantised, any device (default); 'dynamic' = LibTorch's dynamically "
                        "quantised linears (8-bit activations, CPU only)")
    p.add_argument("--name", help="model_name in the manifest (default: checkpoint folder name)")
    p.add_argument("--template", choices=["auto"] + list(TEMPLATES), default="auto",
                   help="conversation template (manifest prompt.template): auto = the LLaVA "
                        "evaluation template of the checkpoint's family (vicuna_v1, "
                        "mistral_instruct, chatml_direct); chatml = the llava-hf 34b chat template")
    p.add_argument("--image-mode", choices=list(IMAGE_MODES), default=None,
                   help="LLaVA-1.5 image preprocessing: pad = LLaVA's expand2square in the mean "
                        "colour (the paper's / LLaVA eval scripts' numbers), crop = "
                        "CLIPImageProcessor's shortest-edge resize + centre crop (transformers "
                        "with llava-hf's processor); default: what the checkpoint's "
                        "preprocessor_config.json does")
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------------
# manifest

def is_byte_level(ckpt):
    """Qwen2's tokenizer.json (byte-level BPE) rather than a SentencePiece tokenizer.model."""
    return ckpt.tokenizer_path.endswith(".json")


def bundle_files(ckpt):
    """The manifest's "files": the tokenizer keeps its own name (tokenizer.model or
    tokenizer.json; the C++ side picks the reader by it)."""
    files = dict(FILES)
    files["tokenizer"] = os.path.basename(ckpt.tokenizer_path) if is_byte_level(ckpt) else FILES["tokenizer"]
    return files


def special_token_ids(ckpt):
    """content -> id of every piece that is one id in a prompt: HF's added tokens, and ChatML's
    markers where they are pieces of the SentencePiece model (Yi's are)."""
    ids = dict(ckpt.added_tokens)
    if is_byte_level(ckpt):  # tokenizer.json lists every special token among its added tokens
        return ids
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=ckpt.tokenizer_path)
    for piece in ("<|im_start|>", "<|im_end|>"):
        pid = sp.piece_to_id(piece)
        if piece not in ids and pid != sp.unk_id() and sp.id_to_piece(pid) == piece:
            ids[piece] = pid
    return ids


def prompt_and_stops(ckpt, template):
    """(manifest prompt section, tokens.added_tokens list, tokens.stop_ids) for `template`
    ("auto" or a TEMPLATES name)."""
    specials = special_token_ids(ckpt)
    if template == "auto":  # the family's evaluation template, else the one of its text model
        template = (families.get(ckpt.config.arch).DEFAULT_TEMPLATE
                    or default_template(ckpt.chat_template, ckpt.config.text.model_type, specials))
    section = prompt_section(template)
    _, needs, stop_piece = TEMPLATES[template]
    missing = [t for t in needs if t not in specials]
    if missing:
        raise TemplateError(f"{ckpt.folder}: template {template} needs {', '.join(missing)} as "
                            f"single tokens, but neither the tokenizer files nor tokenizer.model "
                            f"have them")
    stops = [ckpt.eos_id] + [i for i in ckpt.generation_eos if i != ckpt.eos_id]
    if stop_piece is not None and specials[stop_piece] not in stops:
        stops.append(specials[stop_piece])  # ChatML answers end with <|im_end|>
    added = [{"content": c, "id": i} for c, i in sorted(specials.items(), key=lambda kv: kv[1])]
    return section, added, stops


def image_manifest(cfg, pre):
    """The manifest's "image" section: how the C++ side turns an image into crops."""
    image = {"aspect_ratio": pre.mode, "size": pre.crop_size,
             "shortest_edge": pre.shortest_edge, "resample": pre.resample,
             "mean": pre.mean, "std": pre.std,
             "pad_color": [int(m * 255) for m in pre.mean]}  # LLaVA's expand2square colour
    return families.get(cfg.arch).image_section(cfg, image)  # NeXT, OneVision: their pinpoints


def make_manifest(ckpt, name, dtype_name, attention, template="auto", int8=None, int8_scheme=INT8_SCHEMES[0]):
    cfg, pre = ckpt.config, ckpt.preprocessor
    prompt, added_tokens, stop_ids = prompt_and_stops(ckpt, template)
    v, t = cfg.vision, cfg.text
    image = image_manifest(cfg, pre)
    manifest = {
        "format": "era-bundle",
        "format_version": 1,
        "arch": cfg.arch,
        "model_name": name,
        "dtype": dtype_name,
        "exported_with": {"torch": torch.__version__, "attention": attention,
                          "exporter": "tools/export_llava.py", "decoder_api": DECODER_API},
        "files": bundle_files(ckpt),
        "vision": {"image_size": v.image_size, "patch_size": v.patch_size,
                   "num_patches": v.num_patches, "hidden_size": v.hidden_size,
                   "num_heads": v.num_heads, "num_layers": v.num_layers,
                   "intermediate_size": v.intermediate_size,
                   # the deepest selected layer (where the saliency maps come from); all of
                   # them, as config.json lists them, in feature_layers
                   "feature_layer": (v.feature_layer if isinstance(v.feature_layer, int)
                                     else v.layers_run - v.num_layers - 1),
                   "feature_layers": list(v.feature_layers or [v.feature_layer]),
                   # SigLIP: no CLS token (its saliency is the mean attention each token gets)
                   "has_cls": v.has_cls,
                   "layers_run": v.layers_run, "select_strategy": v.select_strategy,
                   "tokens_per_crop": v.tokens_per_crop},
        "projector": {"in_features": v.feature_width, "out_features": t.hidden_size,
                      "act": cfg.projector_act},
        "text": {"hidden_size": t.hidden_size, "num_layers": t.num_layers,
                 "num_heads": t.num_heads, "num_kv_heads": t.num_kv_heads,
                 "head_dim": t.head_dim, "cache_head_dim": t.cache_head_dim,
                 "intermediate_size": t.intermediate_size, "vocab_size": t.vocab_size,
                 "max_position_embeddings": t.max_position_embeddings,
                 "rms_norm_eps": t.rms_norm_eps, "rope_theta": t.rope_theta,
                 # era does not implement the window: the C++ side limits a sequence to it
                 "model_type": t.model_type, "sliding_window": t.sliding_window},
        "tokens": {"bos_id": ckpt.bos_id, "eos_id": ckpt.eos_id, "pad_id": cfg.pad_token_id,
                   "image_token_id": cfg.image_token_id,
                   "tokenizer_vocab_size": ckpt.tokenizer_vocab_size,
                   "stop_ids": stop_ids, "added_tokens": added_tokens},
        "image": image,
        "prompt": prompt,
    }
    if int8:
        activations = ("activations in the model dtype" if int8_scheme == "weight-only"
                       else "dynamically quantised 8-bit activations")
        manifest["quantization"] = {"int8": int8, "int8_scheme": int8_scheme,
                                    "scheme": f"per-output-channel symmetric int8 weights, {activations}"}
    if ckpt.video is not None:  # OneVision: frames, their placeholder and its id
        manifest["video"] = ckpt.video
        manifest["tokens"]["video_token_id"] = cfg.video_token_id
        manifest["prompt"]["video_placeholder"] = "<video>"
    # the family's own sections (Qwen2.5-VL: native-resolution patches, merger MLP, multimodal RoPE)
    families.get(cfg.arch).manifest_sections(ckpt, manifest)
    return manifest


# ------------------------------------------------------------------------------------------------
# verification: reloaded TorchScript == eager on small random inputs

def check_setup(dtype, cpu_only=False):
    """Device and dtype to compare on. float16 matmuls are not implemented on CPU in older torch,
    so without CUDA a float16 export is compared in float32 (this still checks that scripting
    preserved the computation; only the precision differs). "dynamic" int8 weights run on the CPU
    only (cpu_only); weight-only ones anywhere."""
    device = torch.device("cuda" if torch.cuda.is_available() and not cpu_only else "cpu")
    if device.type == "cpu" and dtype == torch.float16:
        return device, torch.float32
    return device, dtype


def probe_inputs(ckpt, device, dtype):
    cfg = ckpt.config
    g = torch.Generator().manual_seed(1234)
    S, C = cfg.vision.image_size, cfg.vision.feature_width
    t = cfg.text
    T0, S_max = 5, 8
    family = families.get(cfg.arch)
    has_newline = family.IMAGE_NEWLINE
    crops = 3 if has_newline else 1  # anyres: base + tiles go through the tower as one batch
    extra = {"pos": torch.arange(T0 + 3).unsqueeze(0).to(device)}
    # the family's own inputs (Qwen2.5-VL: patches + grid_thw, positions [B,T,3])
    extra.update({k: v.to(device) for k, v in family.probe_extras(cfg, g, T0).items()})
    return {**extra,
        "next": has_newline,
        "pixels": torch.randn(crops, 3, S, S, generator=g).to(device),
        "features": torch.randn(1, 6, C, generator=g).to(device, dtype),
        "ids": torch.randint(0, t.vocab_size, (1, T0 + 3), generator=g).to(device),
        "bias": (torch.rand(1, T0 + 3, generator=g) * 1.79).to(device),
        "scales": (torch.rand(t.num_layers, generator=g) * 2.0).to(device),
        "q": torch.randn(1, t.num_heads, 3, t.head_dim, generator=g).to(device, dtype),
        "k": torch.randn(1, t.num_heads, 7, t.head_dim, generator=g).to(device, dtype),
        "v": torch.randn(1, t.num_heads, 7, t.head_dim, generator=g).to(device, dtype),
        "k_bias": (torch.rand(1, 7, generator=g) * 1.79).to(device),
        "cache_shape": (t.num_layers, 1, t.num_kv_heads, S_max, t.cache_head_dim),
        "T0": T0,
    }


def run_vision(m, x):
    if "patches" in x:  # Qwen2.5-VL: processor patches + grid_thw
        return list(m(x["patches"], x["grid_thw"]))
    return list(m(x["pixels"]))


def run_projector(m, x):
    """forward, plus (NeXT) the image_newline parameter, read through named_parameters so a
    plain attribute (not a registered parameter) would not pass."""
    out = [m(x["features"])]
    if x["next"]:
        params = dict(m.named_parameters())
        if "image_newline" not in params:
            raise CheckFailed("projector: `image_newline` is not a registered parameter")
        out.append(params["image_newline"])
    return out


def decoder_pass(m, x, dtype, lar_path):
    """Prefill (cache_pos 0, T0 tokens, all logits), a one-token decode step (last_only) and
    forward_with_attention on a two-token chunk, with per-layer LAR scales, on a fresh cache."""
    device, T0 = x["pixels"].device, x["T0"]
    k_cache = torch.zeros(x["cache_shape"], dtype=dtype, device=device)
    v_cache = torch.zeros_like(k_cache)
    emb = m.embed(x["ids"])
    pos = x["pos"]  # [1, T0+3], or [1, T0+3, 3] (Qwen2.5-VL's multimodal RoPE)
    bias, sc = x["bias"], x["scales"]
    prefill = m(emb[:, :T0], pos[:, :T0], 0, bias[:, :T0], k_cache, v_cache, sc, lar_path, False)
    step = m(emb[:, T0:T0 + 1], pos[:, T0:T0 + 1], T0, bias[:, T0:T0 + 1], k_cache, v_cache, sc,
             lar_path, True)
    last, attn = m.forward_with_attention(emb[:, T0 + 1:], pos[:, T0 + 1:], T0 + 1,
                                          bias[:, T0 + 1:], k_cache, v_cache, sc, lar_path)
    return [prefill, step, last, attn, k_cache, v_cache]


def range_pass(m, x, dtype):
    """The in-decoder pruning pieces: run_range over [0, 1) with attention and [1, L) on gapped
    positions (every other token), final_norm, logits; on a fresh cache."""
    device, T0 = x["pixels"].device, x["T0"]
    k_cache = torch.zeros(x["cache_shape"], dtype=dtype, device=device)
    v_cache = torch.zeros_like(k_cache)
    emb = m.embed(x["ids"])[:, :T0]
    pos = x["pos"][:, :T0]
    bias, sc = x["bias"][:, :T0], x["scales"]
    n = len(x["scales"])
    low, attn = m.run_range(emb, pos, 0, bias, k_cache, v_cache, sc, 0, 0, 1, True)
    keep = torch.arange(0, T0, 2, device=device)
    high, _ = m.run_range(low[:, keep], pos[:, keep], 0, bias[:, keep], k_cache, v_cache, sc, 1,
                          1, n, False)
    return [low, attn, high, m.final_norm(high), m.logits(high, False), m.logits(high, True),
            k_cache, v_cache]


def run_decoder(m, x, dtype):
    """embed, both LAR paths (decoder_pass), attend, the layer-range methods (range_pass)."""
    emb = m.embed(x["ids"])
    att = m.attend(x["q"], x["k"], x["v"], x["k_bias"], 2)
    return ([emb] + decoder_pass(m, x, dtype, 0) + decoder_pass(m, x, dtype, 1) + [att]
            + range_pass(m, x, dtype))


def max_diff(ref, got):
    return max(float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
               for a, b in zip(ref, got))


def verify(paths, modules, ckpt, dtype, cpu_only=False):
    device, check_dtype = check_setup(dtype, cpu_only)
    note = ""
    if check_dtype != dtype:
        note = f" (compared in {str(check_dtype).replace('torch.', '')} on {device.type})"
    x = probe_inputs(ckpt, device, check_dtype)
    runners = {"vision": run_vision, "projector": run_projector,
               "decoder": lambda m, inp: run_decoder(m, inp, check_dtype)}
    refs = {}
    with torch.no_grad():
        for key in ("vision", "projector", "decoder"):
            m = modules.pop(key).to(device=device, dtype=check_dtype)  # in place: already saved
            refs[key] = runners[key](m, x)
            del m  # keep one copy of the weights in memory, even for 7B models
        for key in ("vision", "projector", "decoder"):
            loaded = torch_versions.load(paths[key], map_location=device)
            if check_dtype != dtype:
                loaded = loaded.to(check_dtype)
            got = runners[key](loaded, x)
            del loaded
            diff = max_diff(refs[key], got)
            scale = max(1.0, max(float(r.float().abs().max()) for r in refs[key] if r.numel()))
            tol = TOLERANCE[check_dtype] * scale
            report_check(FILES[key], diff, tol, note,
                         f"{paths[key]}: reloaded TorchScript module differs from the eager module by")
            if key == "decoder":
                check_lar_paths(got, paths[key], check_dtype, note)


def check_lar_paths(outputs, path, dtype, note):
    """The reloaded decoder's augmented-key and additive-mask paths must agree (logits, attention
    logits and the caches they wrote). outputs: run_decoder's list."""
    n = 6  # decoder_pass outputs
    aug, mask = outputs[1:1 + n], outputs[1 + n:1 + 2 * n]
    # each tensor against its own magnitude (the caches' bias channel is larger than the logits);
    # report the pair closest to its tolerance
    pairs = []
    for a, b in zip(aug, mask):
        scale = max(1.0, float(a.float().abs().max()) if a.numel() else 0.0)
        pairs.append((max_diff([a], [b]), PATH_TOLERANCE[dtype] * scale))
    diff, tol = max(pairs, key=lambda p: p[0] / p[1])
    report_check("LAR paths", diff, tol, note, f"{path}: the augmented-key and additive-mask LAR paths differ by")


def report_check(label, diff, tol, note, failure):
    """Prints one check line; raises CheckFailed("<failure> <diff> (tolerance <tol>)") past tol."""
    status = "ok" if diff <= tol else "FAILED"
    print(f"export_llava: check {label:<12} max abs diff {diff:.3g} (tolerance {tol:.3g}){note}: {status}")
    if diff > tol:
        raise CheckFailed(f"{failure} {diff:.3g} (tolerance {tol:.3g})")


# ------------------------------------------------------------------------------------------------

def prepare_out(out):
    """Refuse to replace anything that is not an era bundle (a typo must not delete a folder)."""
    if os.path.lexists(out):
        if not os.path.isdir(out) or os.path.islink(out):
            raise ExportError(f"{out}: exists and is not a folder")
        if os.listdir(out) and not os.path.isfile(os.path.join(out, "manifest.json")):
            raise ExportError(f"{out}: exists, is not empty and is not a bundle (no manifest.json); "
                              f"refusing to replace it")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)


def install(tmp, out):
    """Move the finished bundle into place; an old bundle is removed only after the swap."""
    old = None
    if os.path.lexists(out):
        old = f"{out}.old-{os.getpid()}"
        os.rename(out, old)
    os.rename(tmp, out)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def export(args):
    """export_llava.py's command: load and validate the checkpoint, then export_checkpoint()."""
    ckpt = load_checkpoint(args.checkpoint)
    ckpt.preprocessor = with_image_mode(ckpt.preprocessor, args.image_mode, ckpt.config)
    print(f"export_llava: {ckpt.folder}: {ckpt.weights_file}, layout {ckpt.layout}, "
          f"{len(ckpt.ignored)} unused tensor(s) ignored")
    name = args.name or os.path.basename(os.path.normpath(os.path.abspath(args.checkpoint)))
    return export_checkpoint(ckpt, args.out, args.dtype, args.attention, name, template=args.template,
                             int8=args.int8, int8_scheme=args.int8_scheme)


def export_checkpoint(ckpt, out, dtype_name, attention_mode="auto", name=None, check=True,
                      template="auto", int8=None, int8_scheme=INT8_SCHEMES[0]):
    """Build the eager modules from `ckpt` (a LlavaCheckpoint whose vision / projector / text
    dicts hold the weights: loaded from a folder, or random from tools/make_random_bundle.py),
    script and save them with the tokenizer and manifest, verify (unless check=False) and move the
    bundle into place. The checkpoint's tensors are handed to the modules (ckpt is emptied) so a
    7B model is held once. int8: None, "decoder" or "all" (export_llava.py --int8); int8_scheme:
    "weight-only" or "dynamic" (--int8-scheme, int8_weights.py)."""
    start = time.time()
    check_export_torch()  # also for callers that skip main(), e.g. make_random_bundle
    problem = families.get(ckpt.config.arch).export_problem(ckpt)
    if problem:
        raise ExportError(problem)
    try:
        attention = resolve_attention(attention_mode)
    except ValueError as e:
        raise ExportError(str(e)) from None
    dtype = DTYPES[dtype_name]
    if int8 is not None and int8 not in INT8_MODULES:
        raise ExportError(f"--int8 {int8!r}: not one of {', '.join(INT8_MODULES)}")
    if int8_scheme not in INT8_SCHEMES:
        raise ExportError(f"--int8-scheme {int8_scheme!r}: not one of {', '.join(INT8_SCHEMES)}")
    if int8 and not int8_available(int8_scheme):
        raise ExportError(f"--int8-scheme {int8_scheme}: torch {torch.__version__} has no quantisation engine "
                          f"(supported: {torch.backends.quantized.supported_engines})")
    # before any work: a template the tokenizer cannot serve is a user error
    prompt_and_stops(ckpt, template)
    out = os.path.abspath(out)
    name = name or os.path.basename(os.path.normpath(out))
    prepare_out(out)

    with torch.no_grad():
        modules = {"vision": build_vision(ckpt, dtype, attention),
                   "projector": build_projector(ckpt, dtype),
                   "decoder": build_decoder(ckpt, dtype, attention)}
    ckpt.vision, ckpt.projector, ckpt.text = {}, {}, {}  # the modules own the weights now
    if int8:
        for key in (("decoder",) if int8 == "decoder" else ("vision", "projector", "decoder")):
            n = quantize_module(modules[key], int8_scheme)
            print(f"export_llava: {key}: {n} linear layers stored as int8 ({int8_scheme})")

    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=os.path.dirname(out))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it 0700; a bundle is an ordinary folder
    try:
        files = bundle_files(ckpt)
        paths = {k: os.path.join(tmp, files[k]) for k in files}
        for key in ("vision", "projector", "decoder"):
            scripted = torch_versions.script(modules[key])
            torch_versions.save(scripted, paths[key])
            del scripted
        shutil.copyfile(ckpt.tokenizer_path, paths["tokenizer"])
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(make_manifest(ckpt, name, dtype_name, attention, template, int8, int8_scheme), f, indent=2)
            f.write("\n")
        if check:
            verify(paths, modules, ckpt, dtype, cpu_only=int8 is not None and int8_scheme == "dynamic")
        else:
            print("export_llava: numerical check skipped")
        modules.clear()
        install(tmp, out)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"export_llava: wrote {out} (dtype {dtype_name}{', int8 ' + int8 + ' ' + int8_scheme if int8 else ''}, attention {attention}, "
          f"torch {torch.__version__}) in {time.time() - start:.1f} s")
    return 0


def main(argv=None):
    args = parse_args(argv)
    try:
        check_export_torch()  # at startup: before minutes of loading a 7B checkpoint
        return export(args)
    except (ExportError, CheckpointError, WeightsFileError, TemplateError, UnsupportedTorch) as e:
        print(f"export_llava: error: {e}", file=sys.stderr)
        return 2
    except CheckFailed as e:
        print(f"export_llava: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
