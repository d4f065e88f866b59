"""Qwen2.5-VL (`Qwen2_5_VLForConditionalGeneration`, config.json model_type "qwen2_5_vl"): its
config, processors, tensor layout, modules and manifest sections.

The registry (era_tools.families) dispatches here. The result is the same LlavaCheckpoint
object export_llava.export_checkpoint takes for LLaVA, with config.arch "qwen2.5-vl":
  - config.vision: a QwenVisionConfig (the tower of qwen_vl_model.QwenVisionTower);
  - config.text: hf_checkpoint.TextConfig with qkv biases and `mrope_section`;
  - weights: canonical name -> tensor per part. Vision: the tower's names (patch_embed.*,
    blocks.N.*, ln_q.weight = merger.ln_q.weight); projector: linear_1 / linear_2 = the merger's
    mlp.0 / mlp.2; text: llava_model.LlamaDecoder's names (embed_tokens, layers.N.*, norm,
    lm_head). Both name layouts are read: transformers 5's `model.visual.*`,
    `model.language_model.*`, `lm_head.*` and the released checkpoints' `visual.*`, `model.*`,
    `lm_head.*`; with tie_word_embeddings and no lm_head the embedding matrix is the head;
  - the tokenizer: checkpoint_base's byte-level (Qwen2) tokenizer.json handling (added tokens,
    chat template, generation_config eos);
  - ckpt.image / ckpt.video: the manifest's "image" / "video" sections, from the saved image
    and video processors (Qwen2VLImageProcessor / Qwen2VLVideoProcessor).

Errors are checkpoint_base.CheckpointError naming the file and the field.
"""
import os
import sys
from dataclasses import dataclass, field

import torch

from ..checkpoint_base import (CLIP_MEAN, CLIP_STD, PIL_RESAMPLE_IDS, PIL_RESAMPLE_NAMES,
                               CheckpointError, LlavaConfig, Preprocessor, TextConfig, _int,
                               _read_json, attach_weights, byte_level_checkpoint, check_folder,
                               decoder_shapes, load_added_tokens, load_chat_template,
                               load_generation_eos, with_mode)
from ..llava_model import assign_weights, build_llava_projector
from ..prompt_template import QWEN_SYSTEM
from ..qwen_vl_model import QwenVisionTower
from .. import make_tiny_qwen_vl

ARCH = "qwen2.5-vl"
LABEL = "Qwen2.5-VL"
MODEL_TYPE = "qwen2_5_vl"
HF_CLASS = "Qwen2_5_VLForConditionalGeneration"
OWN_CLASS_ERROR = True      # load_config names a wrong `architectures` itself
IMAGE_NEWLINE = False
DEFAULT_TEMPLATE = "chatml"  # Qwen2.5-VL-Instruct's own chat template: ChatML, default system
LLAMA_TEXT_MODEL = False
FIXED_IMAGE_MODE = None

# Qwen2_5_VLTextConfig's defaults (transformers configuration_qwen2_5_vl.py).
TEXT_DEFAULTS = {
    "vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
    "use_sliding_window": False, "rope_theta": 1000000.0,
}
# Qwen2_5_VLVisionConfig's defaults.
VISION_DEFAULTS = {
    "depth": 32, "hidden_size": 3584, "hidden_act": "silu", "intermediate_size": 3420,
    "num_heads": 16, "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2,
    "temporal_patch_size": 2, "tokens_per_second": 4, "window_size": 112,
    "out_hidden_size": 3584, "fullatt_block_indexes": [7, 15, 23, 31],
}
DEFAULT_MROPE = [16, 24, 24]  # Qwen2_5_VLRotaryEmbedding's fallback
# The image processor's defaults (Qwen2VLImageProcessor: size shortest_edge / longest_edge).
IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS = 56 * 56, 28 * 28 * 1280
# Qwen2VLVideoProcessor's defaults.
VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS = 128 * 28 * 28, 28 * 28 * 768
VIDEO_FPS, VIDEO_MIN_FRAMES, VIDEO_MAX_FRAMES = 2.0, 4, 768
IMAGE_PROCESSORS = ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast", "Qwen2VLImageProcessorPil")
VIDEO_PROCESSORS = ("Qwen2VLVideoProcessor",)
# Which resize each image processor class runs (transformers 5.17): "Qwen2VLImageProcessor" is
# the torchvision backend (what AutoProcessor loads for a saved Qwen2.5-VL processor when
# torchvision is installed); "...Pil" is PIL's.
RESIZE_ARITHMETIC = {"Qwen2VLImageProcessor": "torch", "Qwen2VLImageProcessorFast": "torch",
                     "Qwen2VLImageProcessorPil": "pillow"}
QWEN_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")


@dataclass
class QwenVisionConfig:
    """The vision tower (Qwen2_5_VLVisionConfig) in era's terms; the VisionConfig properties the
    exporter reads are given their Qwen meaning (one "crop" = one 2x2 merge unit of 28 px)."""
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    window_size: int
    fullatt_block_indexes: list
    out_hidden_size: int
    tokens_per_second: int
    hidden_act: str = "silu"
    num_channels: int = 3
    rope_theta: float = 10000.0
    model_type: str = "qwen2_5_vl_vision"
    feature_layer: int = -1
    feature_layers: list = field(default_factory=lambda: [-1])
    select_strategy: str = "full"
    has_cls: bool = False
    tokens_per_crop: int = 1

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    @property
    def feature_width(self):
        """The projector's input: one merge unit's patches side by side (4C)."""
        return self.hidden_size * self.spatial_merge_size ** 2

    @property
    def image_size(self):
        return self.patch_size * self.spatial_merge_size

    @property
    def num_patches(self):
        return self.spatial_merge_size ** 2

    @property
    def layers_run(self):
        return self.num_layers

    @property
    def patch_dim(self):
        """Width of one processor patch row: 3 * temporal * patch * patch (1176)."""
        return self.num_channels * self.temporal_patch_size * self.patch_size ** 2


def _positive(cfg, key, where):
    return _int(cfg, key, where)


def _section(value, head_dim, where):
    ok = (isinstance(value, list) and value and all(isinstance(n, int) and not isinstance(n, bool)
                                                    and n > 0 for n in value))
    if not ok:
        raise CheckpointError(f"{where}: mrope_section {value!r} must be a list of positive integers")
    if sum(value) != head_dim // 2:
        raise CheckpointError(f"{where}: mrope_section {value!r} sums to {sum(value)}, not "
                              f"head_dim / 2 = {head_dim // 2}")
    return list(value)


def load_qwen_config(folder, raw=None):
    """config.json of a Qwen2.5-VL folder -> LlavaConfig(arch="qwen2.5-vl")."""
    path = os.path.join(folder, "config.json")
    if raw is None:
        raw = _read_json(path, "config.json")
    archs = raw.get("architectures") or []
    if raw.get("model_type") != MODEL_TYPE or (archs and HF_CLASS not in archs):
        raise CheckpointError(f"{path}: not a Qwen2.5-VL checkpoint (model_type="
                              f"{raw.get('model_type')!r}, architectures={archs!r}; expected "
                              f"'{MODEL_TYPE}' / {HF_CLASS})")
    # ---- text: transformers 5 nests it in text_config; the released files keep it top level
    tc_raw = raw.get("text_config")
    if tc_raw is not None and not isinstance(tc_raw, dict):
        raise CheckpointError(f"{path}: text_config is not a JSON object")
    where = f"{path}: text_config" if tc_raw is not None else path
    tc = dict(TEXT_DEFAULTS)
    if tc_raw is None:
        tc.update({k: v for k, v in raw.items() if k not in ("vision_config", "model_type")})
    else:
        tc.update(tc_raw)
    if tc.get("hidden_act") != "silu":
        raise CheckpointError(f"{where}: hidden_act {tc.get('hidden_act')!r} not supported (silu)")
    if tc.get("use_sliding_window"):
        raise CheckpointError(f"{where}: use_sliding_window true is not supported (the released "
                              f"Qwen2.5-VL models leave it off)")
    hidden = _positive(tc, "hidden_size", where)
    heads = _positive(tc, "num_attention_heads", where)
    if tc.get("num_key_value_heads") is None:
        tc["num_key_value_heads"] = heads
    kv_heads = _positive(tc, "num_key_value_heads", where)
    if hidden % heads or (hidden // heads) % 2:
        raise CheckpointError(f"{where}: hidden_size {hidden} / num_attention_heads {heads} does "
                              f"not give an even head_dim")
    if heads % kv_heads:
        raise CheckpointError(f"{where}: num_attention_heads {heads} is not a multiple of "
                              f"num_key_value_heads {kv_heads}")
    head_dim = hidden // heads  # Qwen2_5_VLAttention ignores a head_dim field
    rope = tc.get("rope_parameters")
    rope_key = "rope_parameters"
    if not isinstance(rope, dict):
        rope, rope_key = tc.get("rope_scaling"), "rope_scaling"
    if rope is not None and not isinstance(rope, dict):
        raise CheckpointError(f"{where}: {rope_key} {rope!r} is not a JSON object")
    rope = rope or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "mrope"):
        raise CheckpointError(f"{where}: {rope_key} rope_type {rope_type!r} not supported "
                              f"(default / mrope)")
    theta = rope.get("rope_theta", tc.get("rope_theta"))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or theta <= 0:
        raise CheckpointError(f"{where}: rope_theta {theta!r} must be a positive number")
    mrope = _section(rope.get("mrope_section", DEFAULT_MROPE), head_dim,
                     f"{where}: {rope_key}")
    tied = bool(raw.get("tie_word_embeddings", False) or (tc_raw or {}).get("tie_word_embeddings", False))
    text = TextConfig(
        hidden_size=hidden, intermediate_size=_positive(tc, "intermediate_size", where),
        num_layers=_positive(tc, "num_hidden_layers", where), num_heads=heads,
        num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=_positive(tc, "vocab_size", where),
        max_position_embeddings=_positive(tc, "max_position_embeddings", where),
        rms_norm_eps=float(tc["rms_norm_eps"]), rope_theta=float(theta), tie_word_embeddings=tied,
        model_type="qwen2", sliding_window=None, qkv_bias=True, mrope_section=mrope)

    # ---- vision
    vc_raw = raw.get("vision_config")
    if vc_raw is not None and not isinstance(vc_raw, dict):
        raise CheckpointError(f"{path}: vision_config is not a JSON object")
    vwhere = f"{path}: vision_config"
    vc = dict(VISION_DEFAULTS)
    vc.update(vc_raw or {})
    if "in_chans" in (vc_raw or {}) and "in_channels" not in (vc_raw or {}):
        vc["in_channels"] = vc_raw["in_chans"]  # the released files' name
    if vc.get("hidden_act") != "silu":
        raise CheckpointError(f"{vwhere}: hidden_act {vc.get('hidden_act')!r} not supported (silu)")
    vrope = vc.get("rope_parameters") or {}
    if not isinstance(vrope, dict) or vrope.get("rope_type", "axial") not in ("axial", "default"):
        raise CheckpointError(f"{vwhere}: rope_parameters {vrope!r} not supported (axial)")
    vision = QwenVisionConfig(
        hidden_size=_positive(vc, "hidden_size", vwhere),
        intermediate_size=_positive(vc, "intermediate_size", vwhere),
        num_layers=_positive(vc, "depth", vwhere), num_heads=_positive(vc, "num_heads", vwhere),
        patch_size=_positive(vc, "patch_size", vwhere),
        temporal_patch_size=_positive(vc, "temporal_patch_size", vwhere),
        spatial_merge_size=_positive(vc, "spatial_merge_size", vwhere),
        window_size=_positive(vc, "window_size", vwhere),
        fullatt_block_indexes=list(vc.get("fullatt_block_indexes") or []),
        out_hidden_size=_positive(vc, "out_hidden_size", vwhere),
        tokens_per_second=_positive(vc, "tokens_per_second", vwhere),
        num_channels=_positive(vc, "in_channels", vwhere),
        rope_theta=float(vrope.get("rope_theta", 10000.0)))
    if vision.num_channels != 3:
        raise CheckpointError(f"{vwhere}: in_channels {vision.num_channels} not supported (3)")
    if vision.hidden_size % vision.num_heads or vision.head_dim % 4:
        raise CheckpointError(f"{vwhere}: hidden_size {vision.hidden_size} / num_heads "
                              f"{vision.num_heads} must give a head_dim divisible by 4 (2-D RoPE)")
    if vision.window_size % (vision.patch_size * vision.spatial_merge_size):
        raise CheckpointError(f"{vwhere}: window_size {vision.window_size} is not a multiple of "
                              f"patch_size * spatial_merge_size")
    bad = [i for i in vision.fullatt_block_indexes
           if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vision.num_layers]
    if bad:
        raise CheckpointError(f"{vwhere}: fullatt_block_indexes {bad} out of range for depth "
                              f"{vision.num_layers}")
    if vision.out_hidden_size != text.hidden_size:
        raise CheckpointError(f"{vwhere}: out_hidden_size {vision.out_hidden_size} differs from the "
                              f"text hidden_size {text.hidden_size}")

    ids = {}
    for key, default in (("image_token_id", 151655), ("video_token_id", 151656),
                         ("vision_start_token_id", 151652), ("vision_end_token_id", 151653)):
        tid = raw.get(key, default)
        if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < text.vocab_size:
            raise CheckpointError(f"{path}: {key} {tid!r} is outside the vocabulary (vocab_size "
                                  f"{text.vocab_size})")
        ids[key] = tid
    pad = raw.get("pad_token_id", (tc_raw or {}).get("pad_token_id"))
    cfg = LlavaConfig(vision=vision, text=text, image_token_id=ids["image_token_id"],
                      pad_token_id=-1 if pad is None else pad, projector_act="gelu",
                      projector_bias=True, raw=raw, arch=ARCH, video_token_id=ids["video_token_id"],
                      family=sys.modules[__name__])
    cfg.vision_start_id = ids["vision_start_token_id"]
    cfg.vision_end_id = ids["vision_end_token_id"]
    return cfg


# ------------------------------------------------------------------------------------------------
# image and video processors

def _processor_settings(folder, own_file, key):
    """(settings dict or None, path for messages): own_file, else processor_config.json[key]."""
    path = os.path.join(folder, own_file)
    if os.path.isfile(path):
        return _read_json(path, own_file), path
    path = os.path.join(folder, "processor_config.json")
    if os.path.isfile(path):
        pc = _read_json(path, "processor_config.json").get(key)
        if pc is not None and not isinstance(pc, dict):
            raise CheckpointError(f"{path}: {key} is not a JSON object")
        return pc, f"{path} ({key})"
    return None, path


def _pixels(pc, path, default_min, default_max):
    """(min_pixels, max_pixels): top-level min_pixels / max_pixels (older files; they override
    size, as the processors' __init__ does), else size {shortest_edge, longest_edge}
    (transformers 5), else size {min_pixels, max_pixels}, else the class defaults."""
    size = pc.get("size") or {}
    if not isinstance(size, dict):
        raise CheckpointError(f"{path}: size {size!r} is not a JSON object")
    lo = pc.get("min_pixels", size.get("shortest_edge", size.get("min_pixels", default_min)))
    hi = pc.get("max_pixels", size.get("longest_edge", size.get("max_pixels", default_max)))
    for name, v in (("min_pixels", lo), ("max_pixels", hi)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise CheckpointError(f"{path}: {name} (size) {v!r} must be a positive integer")
    if lo > hi:
        raise CheckpointError(f"{path}: min_pixels {lo} is larger than max_pixels {hi}")
    return lo, hi


def _common(pc, path, vision):
    """The settings both processors share: geometry equal to the tower's, the fixed steps,
    bicubic, mean / std. -> (resample name, mean, std)."""
    for key, want in (("patch_size", vision.patch_size), ("merge_size", vision.spatial_merge_size),
                      ("temporal_patch_size", vision.temporal_patch_size)):
        if pc.get(key, want) != want:
            raise CheckpointError(f"{path}: {key} {pc.get(key)!r} differs from the vision "
                                  f"config's {want}")
    for key in ("do_resize", "do_rescale", "do_normalize", "do_convert_rgb"):
        if pc.get(key, True) is not True:
            raise CheckpointError(f"{path}: {key} {pc.get(key)!r} not supported (only true)")
    rescale = pc.get("rescale_factor", 1 / 255)
    if isinstance(rescale, bool) or not isinstance(rescale, (int, float)) or abs(rescale * 255 - 1) > 1e-12:
        raise CheckpointError(f"{path}: rescale_factor {rescale!r} not supported (only 1/255)")
    resample = PIL_RESAMPLE_NAMES.get(pc.get("resample", PIL_RESAMPLE_IDS["bicubic"]))
    if resample != "bicubic":
        raise CheckpointError(f"{path}: resample {pc.get('resample')!r} not supported (bicubic 3)")
    mean, std = pc.get("image_mean", CLIP_MEAN), pc.get("image_std", CLIP_STD)
    for key, v in (("image_mean", mean), ("image_std", std)):
        if not (isinstance(v, list) and len(v) == 3
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
            raise CheckpointError(f"{path}: {key} must be a list of 3 numbers, got {v!r}")
    if min(std) <= 0:
        raise CheckpointError(f"{path}: image_std must be positive")
    return resample, [float(x) for x in mean], [float(x) for x in std]


def _read_processor(folder, vision, kind, file, classes, pixels):
    """The saved image or video processor (`kind` "image" / "video") of a Qwen2.5-VL folder:
    (settings, path, class name, resample, mean, std, min_pixels, max_pixels), its class one of
    `classes`, its pixel range defaulting to `pixels`."""
    pc, path = _processor_settings(folder, file, f"{kind}_processor")
    pc = pc or {}
    ptype = pc.get(f"{kind}_processor_type", classes[0])
    if ptype not in classes:
        raise CheckpointError(f"{path}: {kind}_processor_type {ptype!r} does not fit a Qwen2.5-VL "
                              f"checkpoint ({', '.join(classes)})")
    if pc.get("do_center_crop"):
        raise CheckpointError(f"{path}: do_center_crop true not supported (Qwen2-VL resizes)")
    resample, mean, std = _common(pc, path, vision)
    lo, hi = _pixels(pc, path, *pixels)
    return pc, path, ptype, resample, mean, std, lo, hi


def load_qwen_image_processor(folder, vision):
    """-> (Preprocessor, the manifest's "image" section)."""
    pc, _, ptype, resample, mean, std, lo, hi = _read_processor(
        folder, vision, "image", "preprocessor_config.json", list(IMAGE_PROCESSORS),
        (IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS))
    unit = vision.image_size  # 28: one merge unit
    image = {"aspect_ratio": "native", "size": unit, "shortest_edge": unit, "resample": resample,
             "mean": mean, "std": std, "pad_color": [0, 0, 0], "min_pixels": lo, "max_pixels": hi,
             "patch_size": vision.patch_size, "merge_size": vision.spatial_merge_size,
             "temporal_patch_size": vision.temporal_patch_size,
             "resize_arithmetic": RESIZE_ARITHMETIC[ptype]}
    pre = Preprocessor(mean=mean, std=std, crop_size=unit, resample=resample, present=bool(pc),
                       mode="native", shortest_edge=unit, processor_type=ptype)
    return pre, image


def load_qwen_video_processor(folder, vision):
    """-> the manifest's "video" section (Qwen2VLVideoProcessor: frames resized by torchvision,
    smart_resize with the video min / max pixels, frame count padded to a multiple of the
    temporal patch by repeating the last frame)."""
    pc, path, _, resample, mean, std, lo, hi = _read_processor(
        folder, vision, "video", "video_preprocessor_config.json", list(VIDEO_PROCESSORS),
        (VIDEO_MIN_PIXELS, VIDEO_MAX_PIXELS))
    fps = pc.get("fps")
    fps = VIDEO_FPS if fps is None else fps
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0:
        raise CheckpointError(f"{path}: fps {fps!r} must be a positive number")
    frames = {}
    for key, default in (("min_frames", VIDEO_MIN_FRAMES), ("max_frames", VIDEO_MAX_FRAMES)):
        v = pc.get(key)
        v = default if v is None else v
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise CheckpointError(f"{path}: {key} {v!r} must be a positive integer")
        frames[key] = v
    return {"size": vision.image_size, "resample": resample, "resize_arithmetic": "torch",
            "mean": mean, "std": std, "pool_stride": 1, "min_pixels": lo, "max_pixels": hi,
            "fps": float(fps), "min_frames": frames["min_frames"],
            "max_frames": frames["max_frames"], "temporal_patch_size": vision.temporal_patch_size,
            "merge_size": vision.spatial_merge_size, "patch_size": vision.patch_size}


# ------------------------------------------------------------------------------------------------
# weights

def expected_shapes(cfg):
    """Canonical name -> shape per part (the modules' own parameter names)."""
    v, t = cfg.vision, cfg.text
    C, I, P, T = v.hidden_size, v.intermediate_size, v.patch_size, v.temporal_patch_size
    vision = {"patch_embed.proj.weight": [C, v.num_channels, T, P, P], "ln_q.weight": [C]}
    for i in range(v.num_layers):
        p = f"blocks.{i}."
        vision.update({p + "norm1.weight": [C], p + "norm2.weight": [C],
                       p + "attn.qkv.weight": [3 * C, C], p + "attn.qkv.bias": [3 * C],
                       p + "attn.proj.weight": [C, C], p + "attn.proj.bias": [C],
                       p + "mlp.gate_proj.weight": [I, C], p + "mlp.gate_proj.bias": [I],
                       p + "mlp.up_proj.weight": [I, C], p + "mlp.up_proj.bias": [I],
                       p + "mlp.down_proj.weight": [C, I], p + "mlp.down_proj.bias": [C]})
    W, D = v.feature_width, t.hidden_size
    projector = {"linear_1.weight": [W, W], "linear_1.bias": [W], "linear_2.weight": [D, W],
                 "linear_2.bias": [D]}
    text = decoder_shapes(t)  # qkv biases: TextConfig.qkv_bias
    return {"vision": vision, "projector": projector, "text": text}


# checkpoint prefix -> (part, layout); longest first
_PREFIXES = [("model.visual.", "vision", "transformers>=5"),
             ("model.language_model.", "text", "transformers>=5"),
             ("visual.", "vision", "qwen"), ("model.", "text", "qwen"),
             ("lm_head.", "text", "")]


def _canonical(prefix, part, rest):
    """(part, canonical name) of a checkpoint name's remainder after `prefix`."""
    if prefix == "lm_head.":
        return "text", "lm_head." + rest
    if part == "vision":
        if rest.startswith("merger.ln_q."):
            return "vision", "ln_q." + rest[len("merger.ln_q."):]
        for k, lin in (("0", "linear_1."), ("2", "linear_2.")):
            if rest.startswith(f"merger.mlp.{k}."):
                return "projector", lin + rest[len(f"merger.mlp.{k}."):]
    return part, rest


def checkpoint_name(part, canon, layout="transformers>=5"):
    """How a canonical name is spelled in a layout ("transformers>=5" or "qwen")."""
    new = layout == "transformers>=5"
    if part == "text":
        if canon.startswith("lm_head."):
            return canon
        return ("model.language_model." if new else "model.") + canon
    vis = "model.visual." if new else "visual."
    if part == "projector":
        return vis + canon.replace("linear_1.", "merger.mlp.0.").replace("linear_2.", "merger.mlp.2.")
    if canon.startswith("ln_q."):
        return vis + "merger." + canon
    return vis + canon


def split_state_dict(tensors):
    parts = {"vision": {}, "projector": {}, "text": {}}
    origin, layouts, unknown = {}, set(), []
    for name, t in tensors.items():
        for prefix, part, layout in _PREFIXES:
            if name.startswith(prefix):
                p, canon = _canonical(prefix, part, name[len(prefix):])
                if canon in parts[p]:
                    raise CheckpointError(f"tensor '{name}' and '{origin[(p, canon)]}' are the "
                                          f"same parameter in two name layouts")
                parts[p][canon] = t
                origin[(p, canon)] = name
                if layout:
                    layouts.add(layout)
                break
        else:
            unknown.append(name)
    return parts, origin, layouts, unknown


def load_checkpoint(folder, load_weights=True, raw=None):
    """A Qwen2.5-VL folder -> LlavaCheckpoint (arch "qwen2.5-vl"), tensors unless
    load_weights=False."""
    folder = check_folder(folder)
    cfg = load_qwen_config(folder, raw)
    pre, image = load_qwen_image_processor(folder, cfg.vision)
    ckpt = byte_level_checkpoint(folder, cfg, pre)
    ckpt.image = image
    ckpt.video = load_qwen_video_processor(folder, cfg.vision)
    ckpt.added_tokens = load_added_tokens(folder, cfg)
    ckpt.chat_template = load_chat_template(folder)
    ckpt.generation_eos = load_generation_eos(folder, cfg)
    for content, key in zip(QWEN_TOKENS, ("image_token_id", "video_token_id", "vision_start_id",
                                          "vision_end_id")):
        want = getattr(cfg, key)
        got = ckpt.added_tokens.get(content)
        if got is None:
            raise CheckpointError(f"{ckpt.tokenizer_path}: the tokenizer has no {content} token "
                                  f"(config.json says id {want})")
        if got != want:
            raise CheckpointError(f"{folder}: {content} is id {got} in the tokenizer but "
                                  f"{want} in config.json")
    if not load_weights:
        return ckpt
    return attach_weights(ckpt, folder, cfg, split_state_dict, expected_shapes, checkpoint_name,
                          lambda layouts: "qwen" if layouts == {"qwen"} else "transformers>=5",
                          "no Qwen2.5-VL tensors found (expected names starting with "
                          "'model.visual.' / 'model.language_model.' or 'visual.' / 'model.')")


def manifest_sections(ckpt, manifest):
    """Give an export_llava manifest its Qwen2.5-VL sections (in place)."""
    cfg = ckpt.config
    v, t = cfg.vision, cfg.text
    manifest["vision"].update({
        "temporal_patch_size": v.temporal_patch_size, "spatial_merge_size": v.spatial_merge_size,
        "window_size": v.window_size, "fullatt_block_indexes": list(v.fullatt_block_indexes),
        "tokens_per_second": v.tokens_per_second, "out_hidden_size": v.out_hidden_size,
        "saliency_layer": v.num_layers - 1})
    manifest["projector"] = {"in_features": v.feature_width, "hidden_features": v.feature_width,
                             "out_features": t.hidden_size, "act": "gelu"}
    manifest["text"]["mrope_section"] = list(t.mrope_section)
    manifest["tokens"].update({"bos_id": -1, "image_token_id": cfg.image_token_id,
                               "video_token_id": cfg.video_token_id,
                               "vision_start_id": cfg.vision_start_id,
                               "vision_end_id": cfg.vision_end_id})
    manifest["image"] = dict(ckpt.image)
    manifest["video"] = dict(ckpt.video)
    manifest["prompt"]["video_placeholder"] = "<video>"
    if manifest["prompt"]["template"] == "chatml":
        manifest["prompt"]["system"] = QWEN_SYSTEM
    return manifest


# ------------------------------------------------------------------------------------------------
# the family's hooks (era_tools.families)

def load_config(folder, raw=None):
    return load_qwen_config(folder, raw)


def load_preprocessor(folder, vision, cfg=None):
    return load_qwen_image_processor(folder, vision)[0]


def with_image_mode(pre, mode, cfg):
    return with_mode(pre, mode)


def build_vision(ckpt, dtype, attention):
    """Qwen2.5-VL's tower keeps its own (windowed) attention: patches + grid_thw."""
    return assign_weights(QwenVisionTower(ckpt.config.vision, device="meta", dtype=dtype),
                          ckpt.vision, dtype, "vision tower")


def build_projector(ckpt, dtype):
    # the merger MLP keeps the 4C width between its layers
    return build_llava_projector(ckpt, dtype, image_newline=IMAGE_NEWLINE,
                                 hidden_features=ckpt.config.vision.feature_width)


def export_problem(ckpt):
    return None


def image_section(cfg, image):
    return image  # manifest_sections writes the native-resolution "image" section


def probe_extras(cfg, gen, T0):
    """export_llava's probe inputs: two images (windows with padding, partial windows) and a
    two-slice video of 2x3 windows; decoder positions [B,T,3] whose three axes differ."""
    grid = torch.tensor([[1, 4, 6], [1, 8, 4], [2, 10, 18]])
    n = int((grid[:, 0] * grid[:, 1] * grid[:, 2]).sum())
    extra = {"patches": torch.randn(n, cfg.vision.patch_dim, generator=gen), "grid_thw": grid}
    base = torch.arange(T0 + 3)
    extra["pos"] = torch.stack([base, base + torch.tensor([0, 0, 1, 1, 0, 2, 0, 0]),
                                base * 2 - torch.tensor([0, 1, 0, 1, 0, 0, 0, 0])],
                               dim=-1).unsqueeze(0)
    return extra


def random_init(canon):
    """The vision RMSNorms (make_tiny_llava.init_std knows LLaVA's names)."""
    if canon.endswith(("norm1.weight", "norm2.weight", "ln_q.weight")):
        return (1.0, 0.1)
    return None


# ---- tiny checkpoint (make_tiny_llava.py --arch qwen2.5-vl: transformers writes it) --------

TRANSFORMERS_VERSION = None
TINY_MAX_POSITIONS = 2048
PROCESSOR_CLASS = "Qwen2_5_VLProcessor"
TINY_PREPROCESSOR = None
make_tiny = make_tiny_qwen_vl.make
tiny_config = None
