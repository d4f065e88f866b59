"""What the checkpoint readers of every family share (no family knowledge here: the families
in era_tools/families/ hold that, hf_checkpoint is the front door that picks one).

  - the config / checkpoint objects the exporter takes (VisionConfig, TextConfig, Preprocessor,
    LlavaConfig, LlavaCheckpoint) and CheckpointError;
  - the decoders' and towers' HF class defaults (LLaMA, Mistral, Qwen2; CLIP, SigLIP);
  - the LLaVA-style config reader (text_config + vision_config + the projector's fields), the
    CLIP / NeXT image-processor parser and the llava-hf tensor layout (both name layouts: llava-hf
    `language_model.model.X` / `vision_tower.vision_model.X` / `multi_modal_projector.X`, and
    transformers >= 4.52 `model.language_model.X` / `lm_head.weight` / ...), parametrised by the
    family that calls them;
  - the tokenizer side files (SentencePiece tokenizer.model, Qwen2's byte-level tokenizer.json,
    added tokens, chat template, generation_config eos) and the one weight loader
    (attach_weights), which checks every tensor against the family's expected shapes.

Everything a user can get wrong raises `CheckpointError` (or `WeightsFileError` for unreadable
weight files) with a message naming the file or tensor.
"""
import json
import math
import os
from dataclasses import dataclass, field, replace

from .safetensors_io import WeightsFileError, load_weights_folder, weights_files

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
PIL_RESAMPLE_NAMES = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box",
                      5: "hamming"}
PIL_RESAMPLE_IDS = {name: i for i, name in PIL_RESAMPLE_NAMES.items()}
# The filters era's C++ resize reproduces bit for bit (Pillow's convolution resampler); nearest
# runs through another Pillow path era does not implement.
ERA_RESAMPLE = ("lanczos", "bilinear", "bicubic", "box", "hamming")

# transformers' class defaults (LlamaConfig, CLIPVisionConfig), used for every absent field.
LLAMA_DEFAULTS = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
    "hidden_act": "silu", "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
    "tie_word_embeddings": False,
}
# MistralConfig's defaults (transformers configuration_mistral.py): the same decoder as LLaMA for
# era (RMSNorm, SwiGLU, RoPE, GQA, no biases), plus `sliding_window`, 4096 when absent (an explicit
# null means none; llava-v1.6-mistral-7b-hf, from Mistral-7B-Instruct-v0.2, stores null).
MISTRAL_DEFAULTS = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": None, "hidden_act": "silu", "max_position_embeddings": 4096 * 32,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False,
    "mlp_bias": False, "tie_word_embeddings": False, "sliding_window": 4096,
}
# Qwen2Config's defaults (transformers configuration_qwen2.py): the LLaMA decoder plus biases on
# q/k/v (not o), a sliding window only when use_sliding_window is set (era refuses that).
QWEN2_DEFAULTS = {
    "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "head_dim": None, "hidden_act": "silu", "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": None,
    "tie_word_embeddings": False, "use_sliding_window": False,
}
TEXT_DEFAULTS = {"llama": LLAMA_DEFAULTS, "mistral": MISTRAL_DEFAULTS, "qwen2": QWEN2_DEFAULTS}
CLIP_VISION_DEFAULTS = {
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
    "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 32,
    "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5,
}
# SiglipVisionConfig's defaults (transformers configuration_siglip.py).
SIGLIP_VISION_DEFAULTS = {
    "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
    "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16,
    "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
}
VISION_DEFAULTS = {"clip_vision_model": CLIP_VISION_DEFAULTS, "siglip_vision_model": SIGLIP_VISION_DEFAULTS}
# The activation each tower's era module implements.
VISION_ACT = {"clip_vision_model": "quick_gelu", "siglip_vision_model": "gelu_pytorch_tanh"}
# LlavaConfig builds this CLIP-L/14-336 config when config.json has no vision_config at all.
LLAVA_DEFAULT_VISION = dict(CLIP_VISION_DEFAULTS, hidden_size=1024, intermediate_size=4096,
                            num_hidden_layers=24, num_attention_heads=16, image_size=336,
                            patch_size=14)

# What the vision tower of each vision_config.model_type starts its sequence with.
VISION_HAS_CLS = {"clip_vision_model": True, "siglip_vision_model": False}
# The tokenizer file each text_config.model_type comes with.
TEXT_TOKENIZER = {"llama": "sentencepiece", "mistral": "sentencepiece", "qwen2": "byte-level"}

# checkpoint-name prefix -> (part, canonical prefix). Both layouts; matched longest first.
# (`image_newline` is a whole name, not a prefix: the canonical name is the prefix itself.)
_PREFIXES = [
    ("model.image_newline", "projector", "image_newline"),
    ("image_newline", "projector", "image_newline"),
    ("model.vision_tower.vision_model.", "vision", ""),
    ("model.multi_modal_projector.", "projector", ""),
    ("model.language_model.", "text", ""),
    ("language_model.model.", "text", ""),
    ("language_model.lm_head.", "text", "lm_head."),
    ("vision_tower.vision_model.", "vision", ""),
    # transformers 5 saves the CLIP tower without its `vision_model.` level (CLIPVisionModel's
    # PrefixChange in transformers/conversion_mapping.py), the rest in the llava-hf layout
    ("model.vision_tower.", "vision", ""),
    ("vision_tower.", "vision", ""),
    ("multi_modal_projector.", "projector", ""),
    ("lm_head.", "text", "lm_head."),
]
_LAYOUT_OF_PREFIX = {
    "model.image_newline": "transformers>=4.52",
    "model.vision_tower.vision_model.": "transformers>=4.52",
    "model.multi_modal_projector.": "transformers>=4.52",
    "model.language_model.": "transformers>=4.52",
    "lm_head.": "transformers>=4.52",
    "model.vision_tower.": "transformers>=5",
    "vision_tower.": "transformers>=5",
}


class CheckpointError(ValueError):
    """The folder is not a usable LLaVA checkpoint. The message names the file / tensor."""


@dataclass
class VisionConfig:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_channels: int
    image_size: int
    patch_size: int
    layer_norm_eps: float
    hidden_act: str
    feature_layer: object          # config.json's vision_feature_layer: an int or a list
    select_strategy: str           # "default" (CLS dropped) or "full" (CLS kept)
    feature_layers: list = None    # the same as a list
    model_type: str = "clip_vision_model"   # or "siglip_vision_model" (no CLS token)

    @property
    def has_cls(self):
        return VISION_HAS_CLS.get(self.model_type, False)

    def states_index(self, k):
        """HF hidden_states index k -> non-negative index (0 = embeddings, i = layer i-1 out)."""
        return self.num_layers + 1 + k if k < 0 else k

    @property
    def feature_indices(self):
        """The selected hidden_states indices, non-negative, in config order."""
        return [self.states_index(k) for k in (self.feature_layers or [self.feature_layer])]

    @property
    def feature_width(self):
        """Width of the features the projector takes: one vision hidden size per feature layer."""
        return self.hidden_size * len(self.feature_indices)

    @property
    def tokens_per_crop(self):
        """Visual tokens of one crop: the patches, plus the CLS token under "full" (CLIP); SigLIP
        has no CLS, and "default" drops its first patch as transformers does."""
        if not self.has_cls:
            return self.num_patches - (0 if self.select_strategy == "full" else 1)
        return self.num_patches + (1 if self.select_strategy == "full" else 0)

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    @property
    def grid(self):
        return self.image_size // self.patch_size

    @property
    def num_patches(self):
        return self.grid * self.grid

    @property
    def layers_run(self):
        """Encoder layers that run: HF hidden_states[k] is the output of layer k-1 (index 0 is the
        embeddings), so hidden_states[-2] of 24 layers needs 24 + 1 - 2 = 23 layers."""
        return max(self.feature_indices)


@dataclass
class TextConfig:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    model_type: str = "llama"      # text_config.model_type: "llama" | "mistral" | "qwen2"
    sliding_window: int = None     # mistral: attention window (None: attends to everything)
    qkv_bias: bool = False         # qwen2: q/k/v projections carry a bias (o_proj does not)
    mrope_section: list = None     # Qwen2.5-VL: multimodal RoPE split of head_dim / 2 (else None)

    @property
    def cache_head_dim(self):
        """head_dim + 1 (the LAR bias channel) rounded up to a multiple of 8."""
        return int(math.ceil((self.head_dim + 1) / 8.0)) * 8


@dataclass
class Preprocessor:
    """What the checkpoint's image processor does, in era's terms (the manifest's "image").

    mode: "pad" (LLaVA's expand2square in the mean colour, then the CLIP steps: LLaVA's own
    evaluation, transformers' LlavaImageProcessor with do_pad), "crop" (the CLIP steps only:
    transformers' CLIPImageProcessor, LlavaImageProcessor without do_pad) or "anyres"
    (LlavaNextImageProcessor). The CLIP steps: resize the shortest edge to `shortest_edge` with
    `resample`, centre crop `crop_size`, rescale 1/255, normalise."""
    mean: list = field(default_factory=lambda: list(CLIP_MEAN))
    std: list = field(default_factory=lambda: list(CLIP_STD))
    crop_size: int = 336
    resample: str = "bicubic"
    present: bool = False
    mode: str = "pad"
    shortest_edge: int = 336
    processor_type: str = ""   # the image_processor_type it was read from ("" without a file)


@dataclass
class LlavaConfig:
    vision: VisionConfig
    text: TextConfig
    image_token_id: int
    pad_token_id: int
    projector_act: str
    projector_bias: bool
    raw: dict
    arch: str = "llava-1.5"        # the family's manifest arch (era_tools.families)
    grid_pinpoints: list = None    # NeXT, OneVision: [[height, width], ...] as in config.json
    video_token_id: int = -1       # OneVision, Qwen2.5-VL: the video placeholder's id; else -1
    # the family module that read it (era_tools.families.<name>): its hooks build the modules
    family: object = field(default=None, repr=False, compare=False)


@dataclass
class LlavaCheckpoint:
    folder: str
    config: LlavaConfig
    preprocessor: Preprocessor
    tokenizer_path: str
    tokenizer_vocab_size: int
    bos_id: int
    eos_id: int
    layout: str = ""
    weights_file: str = ""
    # HF added tokens (content -> id) that are one id each in a prompt, the image placeholder
    # excepted (tokenizer_config.json added_tokens_decoder, added_tokens.json, tokenizer.json)
    added_tokens: dict = field(default_factory=dict)
    chat_template: str = ""        # the checkpoint's own chat template text ("" if none)
    video: dict = None             # OneVision: the manifest's "video" section (load_video_processor)
    image: dict = None             # Qwen2.5-VL: the manifest's "image" section (its family's)
    generation_eos: list = field(default_factory=list)  # generation_config.json eos_token_id
    # canonical name -> tensor, one dict per module (names as in llava_model.py)
    vision: dict = field(default_factory=dict)
    projector: dict = field(default_factory=dict)
    text: dict = field(default_factory=dict)
    ignored: list = field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# config

def _read_json(path, what):
    try:
        with open(path, "r", encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: {what} not found") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot read {what}: {e}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: {what} is not a JSON object")
    return data


def _filled(section, defaults):
    out = dict(defaults)
    out.update(section or {})
    return out


def _int(cfg, key, where):
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise CheckpointError(f"{where}: {key} must be a positive integer, got {v!r}")
    return v


# model_type of haotian-liu/LLaVA's checkpoints (liuhaotian/llava-v1.5-7b, llava-v1.6-*): refused
# with the conversion to use.
ORIGINAL_LLAVA_TYPES = ("llava_llama", "llava_mistral", "llava_mpt", "llava_qwen")


def load_llava_config(folder, raw, family):
    """config.json (`raw`, already read) of a LLaVA-style checkpoint -> LlavaConfig, with
    `family`'s defaults and checks: family.ARCH, family.DEFAULTS (text_type, vision_type,
    feature_layer, strategy, image_token), family.DEFAULT_VISION (no vision_config at all),
    family.check_vision(strategy, vision_type, path), family.read_pinpoints(raw, vision, path),
    family.read_video_token(raw, text, image_token, path)."""
    path = os.path.join(folder, "config.json")
    arch = family.ARCH
    defaults = family.DEFAULTS

    # ---- text (LLaMA, Mistral, Qwen2)
    tc_raw = raw.get("text_config")
    text_type = (tc_raw or {}).get("model_type", defaults["text_type"])
    if text_type not in TEXT_DEFAULTS:
        raise CheckpointError(f"{path}: text_config.model_type {text_type!r} is not supported "
                              f"(one of {', '.join(TEXT_DEFAULTS)})")
    tc = _filled(tc_raw, TEXT_DEFAULTS[text_type])
    if tc_raw is None or "vocab_size" not in tc_raw:
        # very old llava configs kept the vocabulary size at the top level only
        tc["vocab_size"] = raw.get("vocab_size", tc["vocab_size"])
    where = f"{path}: text_config"
    # transformers v5 moves rope_theta into rope_parameters
    rope_params = tc.get("rope_parameters")
    if isinstance(rope_params, dict):
        if rope_params.get("rope_type", "default") != "default":
            raise CheckpointError(f"{where}: rope_parameters {rope_params!r} not supported")
        tc["rope_theta"] = rope_params.get("rope_theta", tc["rope_theta"])
    if tc.get("rope_scaling"):
        scaling = tc["rope_scaling"]
        if not (isinstance(scaling, dict) and
                scaling.get("rope_type", scaling.get("type")) == "default"):
            raise CheckpointError(f"{where}: rope_scaling {scaling!r} is not supported")
    window = tc.get("sliding_window") if text_type == "mistral" else None
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise CheckpointError(f"{where}: sliding_window must be a positive integer or null, got "
                              f"{window!r}")
    if text_type == "qwen2" and tc.get("use_sliding_window"):
        raise CheckpointError(f"{where}: use_sliding_window true is not supported (Qwen2's "
                              f"per-layer sliding window; the LLaVA-OneVision models leave it off)")
    if tc.get("hidden_act") != "silu":
        raise CheckpointError(f"{where}: hidden_act {tc.get('hidden_act')!r} not supported (silu)")
    if tc.get("attention_bias") or tc.get("mlp_bias"):
        raise CheckpointError(f"{where}: attention_bias / mlp_bias are not supported")
    hidden = _int(tc, "hidden_size", where)
    heads = _int(tc, "num_attention_heads", where)
    if tc.get("num_key_value_heads") is None:
        tc["num_key_value_heads"] = heads
    kv_heads = _int(tc, "num_key_value_heads", where)
    head_dim = tc.get("head_dim") or hidden // heads
    if heads % kv_heads:
        raise CheckpointError(f"{where}: num_attention_heads {heads} is not a multiple of "
                              f"num_key_value_heads {kv_heads}")
    if head_dim % 2 or (tc.get("head_dim") is None and hidden % heads):
        raise CheckpointError(f"{where}: hidden_size {hidden} / num_attention_heads {heads} does "
                              f"not give an even head_dim")
    text = TextConfig(
        hidden_size=hidden, intermediate_size=_int(tc, "intermediate_size", where),
        num_layers=_int(tc, "num_hidden_layers", where), num_heads=heads, num_kv_heads=kv_heads,
        head_dim=int(head_dim), vocab_size=_int(tc, "vocab_size", where),
        max_position_embeddings=_int(tc, "max_position_embeddings", where),
        rms_norm_eps=float(tc["rms_norm_eps"]), rope_theta=float(tc["rope_theta"]),
        tie_word_embeddings=bool((tc_raw or {}).get("tie_word_embeddings",
                                                    raw.get("tie_word_embeddings", False))),
        model_type=text_type, sliding_window=window, qkv_bias=text_type == "qwen2")

    # ---- vision (CLIP, SigLIP)
    vc_raw = raw.get("vision_config")
    vision_type = (vc_raw or {}).get("model_type", defaults["vision_type"])
    if vision_type not in VISION_DEFAULTS:
        raise CheckpointError(f"{path}: vision_config.model_type {vision_type!r} is not supported "
                              f"(one of {', '.join(VISION_DEFAULTS)})")
    if vc_raw is not None:
        vc = _filled(vc_raw, VISION_DEFAULTS[vision_type])
    else:
        vc = dict(family.DEFAULT_VISION)
    where = f"{path}: vision_config"
    if vc.get("hidden_act") != VISION_ACT[vision_type]:
        raise CheckpointError(f"{where}: hidden_act {vc.get('hidden_act')!r} not supported "
                              f"({VISION_ACT[vision_type]} for {vision_type})")
    # transformers' semantics (LlavaModel.get_image_features in models/llava/modeling_llava.py,
    # LlavaNextModel.get_image_features in models/llava_next/modeling_llava_next.py): an int k
    # selects hidden_states[k]; a list selects each hidden_states[k] and concatenates them along
    # the hidden dim, in the listed order. hidden_states[0] is the embeddings (after
    # pre_layrnorm), hidden_states[k] the output of encoder layer k-1; negative k count from the
    # end of the num_layers + 1 states.
    feature_layer = raw.get("vision_feature_layer", defaults["feature_layer"])
    is_int = lambda x: isinstance(x, int) and not isinstance(x, bool)  # noqa: E731
    if is_int(feature_layer):
        feature_layers = [feature_layer]
    elif isinstance(feature_layer, list) and feature_layer and all(map(is_int, feature_layer)):
        feature_layers = list(feature_layer)
    else:
        raise CheckpointError(f"{path}: vision_feature_layer {feature_layer!r} must be an integer "
                              f"or a non-empty list of integers")
    # "default" drops the CLS token (hidden_states[:, 1:]), "full" keeps it: 577 tokens at 336/14.
    strategy = raw.get("vision_feature_select_strategy", defaults["strategy"])
    if strategy not in ("default", "full"):
        raise CheckpointError(f"{path}: vision_feature_select_strategy {strategy!r} not supported "
                              f"(default or full)")
    family.check_vision(strategy, vision_type, path)
    vision = VisionConfig(
        hidden_size=_int(vc, "hidden_size", where),
        intermediate_size=_int(vc, "intermediate_size", where),
        num_layers=_int(vc, "num_hidden_layers", where),
        num_heads=_int(vc, "num_attention_heads", where),
        num_channels=_int(vc, "num_channels", where), image_size=_int(vc, "image_size", where),
        patch_size=_int(vc, "patch_size", where), layer_norm_eps=float(vc["layer_norm_eps"]),
        hidden_act=vc["hidden_act"], feature_layer=feature_layer, select_strategy=strategy,
        feature_layers=feature_layers, model_type=vision_type)
    if vision.hidden_size % vision.num_heads:
        raise CheckpointError(f"{where}: hidden_size not divisible by num_attention_heads")
    if vision.image_size % vision.patch_size and vision.has_cls:
        # SigLIP's "valid" convolution drops the remainder (384 / 14: 27 patches a side, the
        # last 6 pixels unread); CLIP's position table assumes an exact division.
        raise CheckpointError(f"{where}: image_size not divisible by patch_size")
    bad = [k for k in feature_layers if not 1 <= vision.states_index(k) <= vision.num_layers]
    if bad:
        # index 0 (the embeddings) is refused too: the exported tower reads attention saliency
        # from the deepest layer that runs, so at least one layer must run
        raise CheckpointError(f"{path}: vision_feature_layer {bad} out of range for "
                              f"{vision.num_layers} layers (1..{vision.num_layers} or "
                              f"-{vision.num_layers}..-1)")

    act = raw.get("projector_hidden_act", "gelu")
    if act != "gelu":
        raise CheckpointError(f"{path}: projector_hidden_act {act!r} not supported (gelu)")
    image_token = raw.get("image_token_index", raw.get("image_token_id", defaults["image_token"]))
    pad = raw.get("pad_token_id", (tc_raw or {}).get("pad_token_id"))
    if not isinstance(image_token, int) or not 0 <= image_token < text.vocab_size:
        raise CheckpointError(f"{path}: image_token_index {image_token!r} is outside the "
                              f"vocabulary (vocab_size {text.vocab_size})")
    if pad is None:
        pad = -1
    pinpoints = family.read_pinpoints(raw, vision, path)
    video_token = family.read_video_token(raw, text, image_token, path)
    return LlavaConfig(vision=vision, text=text, image_token_id=image_token, pad_token_id=pad,
                       projector_act=act,
                       projector_bias=bool(raw.get("multimodal_projector_bias", True)), raw=raw,
                       arch=arch, grid_pinpoints=pinpoints, video_token_id=video_token,
                       family=family)


def parse_pinpoints(value, tile, where):
    """Validate a pinpoint list: non-empty [[height, width], ...] of positive multiples of the
    vision tile size (HF cuts the padded canvas into tile x tile crops)."""
    ok = isinstance(value, list) and len(value) > 0
    out = []
    for pair in value if ok else []:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and
                all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in pair)):
            ok = False
            break
        out.append([int(pair[0]), int(pair[1])])
    if not ok:
        raise CheckpointError(f"{where} must be a non-empty list of [height, width] pairs of "
                              f"positive integers, got {value!r}")
    bad = [p for p in out if p[0] % tile or p[1] % tile]
    if bad:
        raise CheckpointError(f"{where}: {bad} are not multiples of the vision image_size {tile}")
    return out


def read_image_processor(folder):
    """(the image processor's settings, path for messages): preprocessor_config.json, else
    processor_config.json's "image_processor" (transformers 5 saves a processor's image-processor
    settings there); (None, path) without either."""
    path = os.path.join(folder, "preprocessor_config.json")
    if os.path.isfile(path):
        return _read_json(path, "preprocessor_config.json"), path
    path = os.path.join(folder, "processor_config.json")
    pc = _read_json(path, "processor_config.json").get("image_processor") \
        if os.path.isfile(path) else None
    if pc is None:
        return None, path
    if not isinstance(pc, dict):
        raise CheckpointError(f"{path}: image_processor is not a JSON object")
    return pc, path + " (image_processor)"


# The image processors era reproduces, by image_processor_type (transformers saves the class name
# without its backend suffix; older files may carry "Fast"), and the architecture each serves.
PROCESSOR_ARCH = {"CLIPImageProcessor": "llava-1.5", "LlavaImageProcessor": "llava-1.5",
                  "LlavaNextImageProcessor": "llava-next"}
# Settings that never change pixel values: bookkeeping, or (NeXT's do_pad) batch padding of the
# number of crops, which a single image does not see. Any key outside this set and the ones
# parse_preprocessor reads is refused: an unknown setting may change the pixels.
PREPROCESSOR_INERT_KEYS = {"image_processor_type", "processor_class", "feature_extractor_type",
                           "_processor_class", "aspect_ratio_setting", "return_tensors",
                           "device", "disable_grouping", "image_seq_length"}
# Settings era implements at one value only (transformers' default for these classes too).
PREPROCESSOR_FIXED = {"do_resize": True, "do_center_crop": True, "do_rescale": True,
                      "do_normalize": True, "do_convert_rgb": True}


def _edge(value, where, key):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise CheckpointError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value


def parse_preprocessor(pc, path, vision, cfg=None, arch="llava-1.5", anyres=False):
    """Read an image processor's settings (a preprocessor_config.json object) into a
    Preprocessor, honouring every setting that changes pixels or refusing it by name.

    Follows transformers' PIL-backend processors (image_processing_pil_clip.py,
    image_processing_pil_llava.py, image_processing_pil_llava_next.py, PilBackend in
    image_processing_backends.py): for LLaVA-1.5, [pad_to_square(mean colour) if
    LlavaImageProcessor and do_pad] -> resize shortest edge to size.shortest_edge -> centre crop
    crop_size -> rescale -> normalise; for NeXT (anyres: the family's tiles), the tiles
    (crop_size) and the base image (squashed to size.shortest_edge) each go through the same
    resize + centre crop. arch: the calling family's, for PROCESSOR_ARCH and messages."""
    is_next = anyres
    ptype = pc.get("image_processor_type")
    if ptype is None:  # transformers' default for the architecture
        ptype = "LlavaNextImageProcessor" if is_next else "CLIPImageProcessor"
    base_type = ptype[:-4] if isinstance(ptype, str) and ptype.endswith("Fast") else ptype
    if base_type not in PROCESSOR_ARCH:
        raise CheckpointError(f"{path}: image_processor_type {ptype!r} is not supported "
                              f"(one of {', '.join(PROCESSOR_ARCH)})")
    if PROCESSOR_ARCH[base_type] != arch:
        raise CheckpointError(f"{path}: image_processor_type {ptype!r} does not fit a {arch} "
                              f"checkpoint")

    known = set(PREPROCESSOR_INERT_KEYS) | set(PREPROCESSOR_FIXED) | {
        "image_mean", "image_std", "crop_size", "size", "resample", "rescale_factor", "do_pad"}
    if is_next:
        known.add("image_grid_pinpoints")
    unknown = sorted(k for k in pc if k not in known)
    if unknown:
        raise CheckpointError(f"{path}: setting(s) {', '.join(unknown)} not supported by era's "
                              f"image preprocessing (they may change the pixels); remove them if "
                              f"they do not")

    for key, needed in PREPROCESSOR_FIXED.items():
        value = pc.get(key, needed)
        if value is not needed:
            raise CheckpointError(f"{path}: {key} {value!r} is not supported (era always does "
                                  f"{key}: {str(needed).lower()})")
    factor = pc.get("rescale_factor", 1 / 255)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
            abs(factor - 1 / 255) > 1e-12:
        raise CheckpointError(f"{path}: rescale_factor {factor!r} is not supported (only 1/255)")

    mean, std = pc.get("image_mean", CLIP_MEAN), pc.get("image_std", CLIP_STD)
    for key, v in (("image_mean", mean), ("image_std", std)):
        if not (isinstance(v, list) and len(v) == 3 and
                all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
            raise CheckpointError(f"{path}: {key} must be a list of 3 numbers, got {v!r}")
    if any(s <= 0 for s in std):
        raise CheckpointError(f"{path}: image_std must be positive")

    # crop_size: {"height": C, "width": C}, or an int C (transformers reads it as a square).
    crop = pc.get("crop_size", vision.image_size)
    if isinstance(crop, dict):
        if set(crop) != {"height", "width"}:
            raise CheckpointError(f"{path}: crop_size {crop!r} is not supported (height and "
                                  f"width)")
        if crop["height"] != crop["width"]:
            raise CheckpointError(f"{path}: crop_size {crop!r} is not square (era crops "
                                  f"squares)")
        crop = crop["height"]
    crop = _edge(crop, path, "crop_size")
    if crop != vision.image_size:
        raise CheckpointError(f"{path}: crop_size {crop} differs from the vision tower's "
                              f"image_size {vision.image_size}")

    # size: {"shortest_edge": S}, or an int S (read as the shortest edge: these classes do not
    # default to square). height/width (a squash) and longest_edge are not implemented.
    size = pc.get("size", {"shortest_edge": crop})
    if isinstance(size, dict):
        if set(size) != {"shortest_edge"}:
            raise CheckpointError(f"{path}: size {size!r} is not supported (only "
                                  f"{{\"shortest_edge\": N}}: era does not implement "
                                  f"{', '.join(sorted(set(size) - {'shortest_edge'}))})")
        size = size["shortest_edge"]
    shortest_edge = _edge(size, path, "size.shortest_edge")

    resample_id = pc.get("resample", 3)
    resample = PIL_RESAMPLE_NAMES.get(resample_id) if not isinstance(resample_id, bool) else None
    if resample is None:
        raise CheckpointError(f"{path}: unknown resample {resample_id!r}")
    if resample not in ERA_RESAMPLE:
        raise CheckpointError(f"{path}: resample {resample_id} ({resample}) is not supported "
                              f"(era's Pillow-exact resize does "
                              f"{', '.join(f'{PIL_RESAMPLE_IDS[n]} ({n})' for n in ERA_RESAMPLE)})")

    do_pad = pc.get("do_pad", is_next)
    if not isinstance(do_pad, bool):
        raise CheckpointError(f"{path}: do_pad must be true or false, got {do_pad!r}")
    if is_next:
        mode = "anyres"
        # The processor lays the crops out with its own pinpoints, the model unpacks them with
        # config.json's: they must be the same list (same order, same (height, width) reading).
        if "image_grid_pinpoints" in pc:
            pins = parse_pinpoints(pc["image_grid_pinpoints"], vision.image_size,
                              f"{path}: image_grid_pinpoints")
            if pins != cfg.grid_pinpoints:
                raise CheckpointError(f"{path}: image_grid_pinpoints {pins} differ from "
                                      f"config.json's {cfg.grid_pinpoints}")
    elif base_type == "LlavaImageProcessor" and do_pad:
        mode = "pad"   # pad_to_square before the resize
    else:
        # CLIPImageProcessor's do_pad pads a batch to its largest image, after the crop: every
        # image is already crop x crop, so it changes nothing.
        mode = "crop"
    return Preprocessor(mean=[float(x) for x in mean], std=[float(x) for x in std],
                        crop_size=int(crop), resample=resample, present=True, mode=mode,
                        shortest_edge=int(shortest_edge), processor_type=str(ptype))


IMAGE_MODES = ("pad", "crop")


def image_mode_checked(mode):
    """--image-mode `mode` checked against IMAGE_MODES (the family decides where it applies)."""
    if mode not in IMAGE_MODES:
        raise CheckpointError(f"--image-mode {mode!r} is not one of {', '.join(IMAGE_MODES)}")
    return mode


def with_mode(pre, mode):
    """`pre` with its mode replaced."""
    return replace(pre, mode=mode)


# ------------------------------------------------------------------------------------------------
# tokenizer side files (all optional)

IMAGE_PLACEHOLDER_TEXT = "<image>"


def load_added_tokens(folder, cfg):
    """content -> id of HF's added tokens inside the model's vocabulary, from every file that
    lists them (later files only add). HF's tokenizers cut a prompt at these before SentencePiece
    sees it, so era must too (manifest tokens.added_tokens). The image placeholder is left out: it
    becomes image_token_id through its own path."""
    found = {}
    tc_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(tc_path):
        tc = _read_json(tc_path, "tokenizer_config.json")
        decoder = tc.get("added_tokens_decoder") or {}
        if not isinstance(decoder, dict):
            raise CheckpointError(f"{tc_path}: added_tokens_decoder is not an object")
        for key, entry in decoder.items():
            content = entry.get("content") if isinstance(entry, dict) else None
            if not (isinstance(content, str) and str(key).isdigit()):
                raise CheckpointError(f"{tc_path}: added_tokens_decoder[{key!r}] has no content / "
                                      f"is not keyed by an id")
            found.setdefault(content, int(key))
    at_path = os.path.join(folder, "added_tokens.json")
    if os.path.isfile(at_path):
        for content, tid in _read_json(at_path, "added_tokens.json").items():
            if not isinstance(tid, int):
                raise CheckpointError(f"{at_path}: {content!r} has id {tid!r}, not an integer")
            found.setdefault(content, tid)
    tj_path = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(tj_path):
        for entry in _read_json(tj_path, "tokenizer.json").get("added_tokens") or []:
            if isinstance(entry, dict) and isinstance(entry.get("content"), str) \
                    and isinstance(entry.get("id"), int):
                found.setdefault(entry["content"], entry["id"])
    for content, tid in found.items():
        if content != IMAGE_PLACEHOLDER_TEXT and not 0 <= tid < cfg.text.vocab_size:
            raise CheckpointError(f"{folder}: added token {content!r} has id {tid}, outside the "
                                  f"model's vocab_size {cfg.text.vocab_size}")
    found.pop(IMAGE_PLACEHOLDER_TEXT, None)
    return found


def load_chat_template(folder):
    """The checkpoint's chat template: chat_template.jinja, chat_template.json, or
    tokenizer_config.json's chat_template (transformers' order of precedence); "" if none."""
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja, "r", encoding="utf-8") as f:
            return f.read()
    for name in ("chat_template.json", "tokenizer_config.json"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            text = _read_json(path, name).get("chat_template")
            if isinstance(text, str):
                return text
    return ""


def load_generation_eos(folder, cfg):
    """generation_config.json's eos_token_id as a list (HF generate stops at any of them)."""
    path = os.path.join(folder, "generation_config.json")
    if not os.path.isfile(path):
        return []
    eos = _read_json(path, "generation_config.json").get("eos_token_id")
    ids = eos if isinstance(eos, list) else ([] if eos is None else [eos])
    for tid in ids:
        if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < cfg.text.vocab_size:
            raise CheckpointError(f"{path}: eos_token_id {eos!r} is not an id in the vocabulary")
    return ids


# ------------------------------------------------------------------------------------------------
# weights

def decoder_shapes(t):
    """Canonical name -> shape of the decoder (llava_model.LlamaDecoder's names)."""
    D = t.hidden_size
    q_out, kv_out = t.num_heads * t.head_dim, t.num_kv_heads * t.head_dim
    text = {"embed_tokens.weight": [t.vocab_size, D], "norm.weight": [D],
            "lm_head.weight": [t.vocab_size, D]}
    for i in range(t.num_layers):
        p = f"layers.{i}."
        text[p + "self_attn.q_proj.weight"] = [q_out, D]
        text[p + "self_attn.k_proj.weight"] = [kv_out, D]
        text[p + "self_attn.v_proj.weight"] = [kv_out, D]
        text[p + "self_attn.o_proj.weight"] = [D, q_out]
        if t.qkv_bias:
            text[p + "self_attn.q_proj.bias"] = [q_out]
            text[p + "self_attn.k_proj.bias"] = [kv_out]
            text[p + "self_attn.v_proj.bias"] = [kv_out]
        text[p + "mlp.gate_proj.weight"] = [t.intermediate_size, D]
        text[p + "mlp.up_proj.weight"] = [t.intermediate_size, D]
        text[p + "mlp.down_proj.weight"] = [D, t.intermediate_size]
        text[p + "input_layernorm.weight"] = [D]
        text[p + "post_attention_layernorm.weight"] = [D]
    return text


def clip_layer_shapes(prefix, C, I):
    """Name -> shape of one CLIP / SigLIP encoder layer (width C, MLP width I), its names behind
    `prefix`, in the order the llava-hf checkpoints list them."""
    shapes = {}
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        shapes[prefix + f"self_attn.{proj}.weight"] = [C, C]
        shapes[prefix + f"self_attn.{proj}.bias"] = [C]
    for ln in ("layer_norm1", "layer_norm2"):
        shapes[prefix + f"{ln}.weight"] = [C]
        shapes[prefix + f"{ln}.bias"] = [C]
    shapes.update({prefix + "mlp.fc1.weight": [I, C], prefix + "mlp.fc1.bias": [I],
                   prefix + "mlp.fc2.weight": [C, I], prefix + "mlp.fc2.bias": [C]})
    return shapes


def llava_expected_shapes(cfg, image_newline=False):
    """Canonical name -> shape for everything a LLaVA-style family's exported modules need, per
    part (CLIP or SigLIP tower, the two-layer projector, plus `image_newline` where the family
    has one, the decoder)."""
    v, t = cfg.vision, cfg.text
    C, I, P = v.hidden_size, v.intermediate_size, v.patch_size
    if v.has_cls:
        vision = {
            "embeddings.class_embedding": [C],
            "embeddings.patch_embedding.weight": [C, v.num_channels, P, P],
            "embeddings.position_embedding.weight": [v.num_patches + 1, C],
            "pre_layrnorm.weight": [C], "pre_layrnorm.bias": [C],
        }
    else:  # SigLIP: a biased patch convolution, one position per patch, no pre-layernorm
        vision = {
            "embeddings.patch_embedding.weight": [C, v.num_channels, P, P],
            "embeddings.patch_embedding.bias": [C],
            "embeddings.position_embedding.weight": [v.num_patches, C],
        }
    for i in range(v.layers_run):
        vision.update(clip_layer_shapes(f"encoder.layers.{i}.", C, I))

    D = t.hidden_size
    projector = {"linear_1.weight": [D, v.feature_width], "linear_2.weight": [D, D]}
    if cfg.projector_bias:
        projector.update({"linear_1.bias": [D], "linear_2.bias": [D]})
    if image_newline:
        projector["image_newline"] = [D]  # one learned token closing every grid row
    text = decoder_shapes(t)
    return {"vision": vision, "projector": projector, "text": text}


def split_state_dict(tensors):
    """Checkpoint names -> ({part: {canonical: tensor}}, {(part, canonical): checkpoint name},
    layouts seen, names that belong to no part)."""
    parts = {"vision": {}, "projector": {}, "text": {}}
    origin, layouts, unknown = {}, set(), []
    for name, t in tensors.items():
        for prefix, part, canon_prefix in _PREFIXES:
            if name.startswith(prefix):
                canon = canon_prefix + name[len(prefix):]
                if canon in parts[part]:
                    raise CheckpointError(f"tensor '{name}' and '{origin[(part, canon)]}' are the "
                                          f"same parameter in two name layouts")
                parts[part][canon] = t
                origin[(part, canon)] = name
                layouts.add(_LAYOUT_OF_PREFIX.get(prefix, "llava-hf"))
                break
        else:
            unknown.append(name)
    return parts, origin, layouts, unknown


def checkpoint_name(part, canon, layout):
    """How a canonical name is spelled in the checkpoint's layout ("llava-hf" or
    "transformers>=4.52"): for error messages, and make_random_bundle's init by name."""
    new = layout == "transformers>=4.52"
    if part == "text":
        if canon.startswith("lm_head."):
            return canon if new else "language_model." + canon
        return ("model.language_model." if new else "language_model.model.") + canon
    if part == "vision":
        return ("model." if new else "") + "vision_tower.vision_model." + canon
    if canon == "image_newline":
        return ("model." if new else "") + canon
    return ("model." if new else "") + "multi_modal_projector." + canon


def check_folder(folder):
    """`folder` as a str, or CheckpointError if it is not a folder."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "checkpoint folder not found"
        raise CheckpointError(f"{folder}: {what}")
    return folder


def read_config(folder):
    """config.json of `folder` as a dict."""
    return _read_json(os.path.join(folder, "config.json"), "config.json")


def load_llava_checkpoint(folder, cfg, pre, load_weights=True, video=None):
    """A LLaVA-style folder whose config (`cfg`) and image processor (`pre`) its family read ->
    LlavaCheckpoint (with tensors unless load_weights=False). video: the family's reader of the
    manifest's "video" section, video(folder, cfg.vision), or None."""
    tok = os.path.join(folder, "tokenizer.model")
    if TEXT_TOKENIZER[cfg.text.model_type] == "byte-level":
        return _with_byte_level_tokenizer(folder, cfg, pre, load_weights, video)
    if not os.path.isfile(tok):
        raise CheckpointError(f"{tok}: tokenizer.model not found (the SentencePiece model is "
                              f"required)")
    import sentencepiece as spm
    try:
        sp = spm.SentencePieceProcessor(model_file=tok)
    except Exception as e:  # sentencepiece raises OSError or RuntimeError depending on version
        raise CheckpointError(f"{tok}: not a SentencePiece model ({e})") from None
    tok_vocab = sp.get_piece_size()
    if tok_vocab > cfg.text.vocab_size:
        raise CheckpointError(f"{tok}: tokenizer has {tok_vocab} pieces, more than the model's "
                              f"vocab_size {cfg.text.vocab_size}")
    ckpt = LlavaCheckpoint(folder=folder, config=cfg, preprocessor=pre, tokenizer_path=tok,
                           tokenizer_vocab_size=tok_vocab, bos_id=sp.bos_id(), eos_id=sp.eos_id())
    return _with_weights(ckpt, folder, cfg, load_weights, video)


def _with_byte_level_tokenizer(folder, cfg, pre, load_weights, video=None):
    """Qwen2's tokenizer: the byte-level BPE of tokenizer.json (read by the C++ side's
    ByteLevelBpe). No BOS; EOS is tokenizer_config.json's eos_token."""
    return _with_weights(byte_level_checkpoint(folder, cfg, pre), folder, cfg, load_weights, video)


def byte_level_checkpoint(folder, cfg, pre):
    """A LlavaCheckpoint with the byte-level tokenizer read (no weights, no side files)."""
    tok = os.path.join(folder, "tokenizer.json")
    data = _read_json(tok, "tokenizer.json (Qwen2's byte-level BPE)")
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise CheckpointError(f"{tok}: model must be a BPE model with a vocab")
    ids = list(model["vocab"].values()) + [t.get("id") for t in data.get("added_tokens") or []
                                             if isinstance(t, dict)]
    if not all(isinstance(i, int) and i >= 0 for i in ids):
        raise CheckpointError(f"{tok}: token ids must be non-negative integers")
    vocab = max(ids) + 1
    if vocab > cfg.text.vocab_size:
        raise CheckpointError(f"{tok}: tokenizer has {vocab} ids, more than the model's vocab_size "
                              f"{cfg.text.vocab_size}")
    by_content = {t["content"]: t["id"] for t in data.get("added_tokens") or []
                  if isinstance(t, dict) and "content" in t}
    tc_path = os.path.join(folder, "tokenizer_config.json")
    tc = _read_json(tc_path, "tokenizer_config.json") if os.path.isfile(tc_path) else {}
    eos = tc.get("eos_token")
    if isinstance(eos, dict):
        eos = eos.get("content")
    eos_id = by_content.get(eos, model["vocab"].get(eos, -1)) if isinstance(eos, str) else -1
    return LlavaCheckpoint(folder=folder, config=cfg, preprocessor=pre, tokenizer_path=tok,
                           tokenizer_vocab_size=vocab, bos_id=-1, eos_id=eos_id)


def _with_weights(ckpt, folder, cfg, load_weights, video=None):
    if video is not None:
        ckpt.video = video(folder, cfg.vision)
    ckpt.added_tokens = load_added_tokens(folder, cfg)
    ckpt.chat_template = load_chat_template(folder)
    ckpt.generation_eos = load_generation_eos(folder, cfg)
    if not load_weights:
        return ckpt

    return attach_weights(ckpt, folder, cfg, split_state_dict, cfg.family.expected_shapes,
                          checkpoint_name,
                          lambda layouts: "transformers>=4.52" if layouts == {"transformers>=4.52"}
                          else "llava-hf",
                          "no LLaVA tensors found (expected names starting with 'language_model.' "
                          "or 'model.language_model.')")


def attach_weights(ckpt, folder, cfg, split, expected_shapes_of, name_of, pick_layout, none_found):
    """Reads the folder's weights into ckpt's vision / projector / text dicts (canonical names),
    checked against expected_shapes_of(cfg): the one loader of every family. `split` maps tensors
    to (parts, origin, layouts, unknown), `name_of(part, canon, layout)` spells a missing tensor as
    the checkpoint would, `pick_layout(layouts)` names the layout, `none_found` is the message when
    no tensor of the family is there. Tied embeddings give lm_head the embedding matrix."""
    ckpt.weights_file = weights_files(folder) or ""
    tensors = load_weights_folder(folder)  # raises WeightsFileError naming the file
    parts, origin, layouts, unknown = split(tensors)
    del tensors
    where = os.path.join(folder, ckpt.weights_file)
    if not layouts:
        raise CheckpointError(f"{where}: {none_found}")
    ckpt.layout = " + ".join(sorted(layouts))
    layout = pick_layout(layouts)

    if cfg.text.tie_word_embeddings and "lm_head.weight" not in parts["text"] \
            and "embed_tokens.weight" in parts["text"]:
        parts["text"]["lm_head.weight"] = parts["text"]["embed_tokens.weight"]

    expected = expected_shapes_of(cfg)
    missing, bad_shape, bad_dtype = [], [], []
    for part, shapes in expected.items():
        for canon, shape in shapes.items():
            name = origin.get((part, canon), name_of(part, canon, layout))
            t = parts[part].get(canon)
            if t is None:
                missing.append(name)
            elif list(t.shape) != shape:
                bad_shape.append(f"{name}: expected {shape}, got {list(t.shape)}")
            elif not t.is_floating_point():
                bad_dtype.append(f"{name}: dtype {t.dtype} is not floating point")
    if missing:
        shown = ", ".join(missing[:8]) + (f" (and {len(missing) - 8} more)" if len(missing) > 8
                                          else "")
        raise CheckpointError(f"{where}: missing {len(missing)} tensor(s): {shown}")
    if bad_shape:
        raise CheckpointError(f"{where}: tensor shape does not match config.json: "
                              + "; ".join(bad_shape[:8]))
    if bad_dtype:
        raise CheckpointError(f"{where}: " + "; ".join(bad_dtype[:8]))

    for part, shapes in expected.items():
        setattr(ckpt, part, {canon: parts[part][canon] for canon in shapes})
        ckpt.ignored.extend(origin[(part, c)] for c in parts[part] if c not in shapes
                            and (part, c) in origin)
    ckpt.ignored.extend(unknown)
    return ckpt


__all__ = ["CheckpointError", "WeightsFileError", "LlavaCheckpoint", "LlavaConfig", "TextConfig",
           "VisionConfig", "Preprocessor", "parse_preprocessor", "IMAGE_MODES",
           "load_llava_config", "load_llava_checkpoint", "llava_expected_shapes", "decoder_shapes",
           "split_state_dict", "checkpoint_name", "attach_weights"]
