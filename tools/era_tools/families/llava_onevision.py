"""LLaVA-OneVision (`LlavaOnevisionForConditionalGeneration`, config.json model_type
"llava_onevision", e.g. llava-hf/llava-onevision-qwen2-0.5b-ov-hf): a SigLIP tower (no CLS token,
"full" selection, hidden_states[-1]), the two-layer projector with NeXT's `image_newline`, a
Qwen2 decoder with its byte-level BPE tokenizer.json; images are anyres tiles on pinpoints up to
2304 px ("anyres_max_9"), videos are frames pooled 2 x 2 (the manifest's "video" section, from
LlavaOnevisionVideoProcessor's settings).
"""
import os
import sys

from .. import checkpoint_base as base
from .. import llava_family_base as llava
from ..checkpoint_base import (CLIP_MEAN, CLIP_STD, ERA_RESAMPLE, PIL_RESAMPLE_IDS,
                               PIL_RESAMPLE_NAMES, PREPROCESSOR_FIXED, SIGLIP_VISION_DEFAULTS,
                               CheckpointError, Preprocessor, _read_json)
# the family's hooks, as every LLaVA-style family has them ("default" selection, which SigLIP
# cannot have, is refused by export_problem, not check_vision)
from ..llava_family_base import (build_projector, build_vision, check_vision,  # noqa: F401
                                 checkpoint_name, expected_shapes, manifest_sections,
                                 probe_extras, random_init, split_state_dict)
from .. import make_tiny_onevision

ARCH = "llava-onevision"
LABEL = "LLaVA-OneVision"
MODEL_TYPE = "llava_onevision"
HF_CLASS = "LlavaOnevisionForConditionalGeneration"
DEFAULTS = {"text_type": "qwen2", "vision_type": "siglip_vision_model", "feature_layer": -1,
            "strategy": "full", "image_token": 151646}
# LlavaOnevisionConfig builds this SigLIP-so400m/14-384 tower when config.json has no vision_config.
DEFAULT_VISION = dict(SIGLIP_VISION_DEFAULTS, hidden_size=1152, intermediate_size=4304,
                      patch_size=14, image_size=384, num_hidden_layers=26,
                      num_attention_heads=16)
# LlavaOnevisionConfig's default image_grid_pinpoints: every (h, w) in 384..2304 step 384.
ONEVISION_DEFAULT_PINPOINTS = [[h, w] for h in range(384, 2305, 384) for w in range(384, 2305, 384)]
IMAGE_NEWLINE = True
# lmms-eval's conv_template for LLaVA-OneVision / LLaVA-Video (LLaVA's conv_qwen_1_5): the
# paper's video numbers
DEFAULT_TEMPLATE = "qwen_1_5"
LLAMA_TEXT_MODEL = False
FIXED_IMAGE_MODE = None

_SELF = sys.modules[__name__]


# ---- config and processor ------------------------------------------------------------------

def read_pinpoints(raw, vision, path):
    return base.parse_pinpoints(raw.get("image_grid_pinpoints") or ONEVISION_DEFAULT_PINPOINTS,
                                vision.image_size, f"{path}: image_grid_pinpoints")


def read_video_token(raw, text, image_token, path):
    video_token = raw.get("video_token_index", raw.get("video_token_id", 151647))
    if not isinstance(video_token, int) or not 0 <= video_token < text.vocab_size \
            or video_token == image_token:
        raise CheckpointError(f"{path}: video_token_index {video_token!r} is outside the "
                              f"vocabulary (vocab_size {text.vocab_size}) or is the image token")
    return video_token


def load_config(folder, raw):
    return base.load_llava_config(folder, raw, _SELF)


def load_preprocessor(folder, vision, cfg=None):
    """The checkpoint's LlavaOnevisionImageProcessor (parse_preprocessor), its defaults without
    one."""
    pc, path = base.read_image_processor(folder)
    return parse_preprocessor({} if pc is None else pc, path, vision, cfg)


def parse_preprocessor(pc, path, vision, cfg):
    """LlavaOnevisionImageProcessor's settings (transformers image_processing_llava_onevision.py).
    For one image it is LlavaNextImageProcessor with `size` {height, width} and no centre crop: the
    image resized into the best pinpoint and padded, cut into tiles, the base image resized to
    size x size, every crop resized to size (a no-op at the tile size) and normalised. That is
    era's "anyres" mode with shortest_edge = crop_size = the tile size, bit for bit (HfPreprocess
    checks it against the processor). (Several images in one prompt are each padded to a square
    instead: the pad mode, a per-request choice for the OneVision family.)"""
    ptype = pc.get("image_processor_type", "LlavaOnevisionImageProcessor")
    if ptype not in ("LlavaOnevisionImageProcessor", "LlavaOnevisionImageProcessorFast"):
        raise CheckpointError(f"{path}: image_processor_type {ptype!r} does not fit a "
                              f"llava-onevision checkpoint (LlavaOnevisionImageProcessor)")
    size = pc.get("size", {"height": 384, "width": 384})
    if not (isinstance(size, dict) and size.get("height") == vision.image_size
            and size.get("width") == vision.image_size):
        raise CheckpointError(f"{path}: size {size!r} must be {{height: {vision.image_size}, "
                              f"width: {vision.image_size}}} (the vision tower's image_size)")
    for key, value in PREPROCESSOR_FIXED.items():
        if key != "do_center_crop" and pc.get(key, value) is not value:
            raise CheckpointError(f"{path}: {key} {pc.get(key)!r} not supported (only {value})")
    if pc.get("do_center_crop"):
        raise CheckpointError(f"{path}: do_center_crop true not supported (OneVision resizes)")
    resample = pc.get("resample", PIL_RESAMPLE_IDS["bicubic"])
    if PIL_RESAMPLE_NAMES.get(resample) not in ERA_RESAMPLE:
        raise CheckpointError(f"{path}: resample {resample!r} not supported")
    mean, std = pc.get("image_mean", CLIP_MEAN), pc.get("image_std", CLIP_STD)
    for key, v in (("image_mean", mean), ("image_std", std)):
        if not (isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, float)) for x in v)):
            raise CheckpointError(f"{path}: {key} must be a list of 3 numbers, got {v!r}")
    if "image_grid_pinpoints" in pc and pc["image_grid_pinpoints"] != cfg.grid_pinpoints:
        raise CheckpointError(f"{path}: image_grid_pinpoints differ from config.json's")
    return Preprocessor(mean=[float(x) for x in mean], std=[float(x) for x in std],
                        crop_size=vision.image_size, resample=PIL_RESAMPLE_NAMES[resample],
                        present=bool(pc), mode="anyres", shortest_edge=vision.image_size,
                        processor_type=ptype)


def load_video_processor(folder, vision):
    """LlavaOnevisionVideoProcessor's settings as the manifest's "video" section: where
    transformers saved them (video_preprocessor_config.json, or processor_config.json's
    "video_processor"), else the class defaults. Frames are resized to size x size by torchvision
    (uint8, antialiased: era's resize arithmetic "torch"), rescaled and normalised."""
    pc, path = {}, os.path.join(folder, "video_preprocessor_config.json")
    if os.path.isfile(path):
        pc = _read_json(path, "video_preprocessor_config.json")
    else:
        path = os.path.join(folder, "processor_config.json")
        if os.path.isfile(path):
            pc = _read_json(path, "processor_config.json").get("video_processor") or {}
            path += " (video_processor)"
    if not isinstance(pc, dict):
        raise CheckpointError(f"{path}: the video processor settings are not a JSON object")
    ptype = pc.get("video_processor_type", "LlavaOnevisionVideoProcessor")
    if ptype != "LlavaOnevisionVideoProcessor":
        raise CheckpointError(f"{path}: video_processor_type {ptype!r} is not LlavaOnevisionVideoProcessor")
    size = pc.get("size", {"height": vision.image_size, "width": vision.image_size})
    if not (isinstance(size, dict) and size.get("height") == vision.image_size
            and size.get("width") == vision.image_size):
        raise CheckpointError(f"{path}: size {size!r} must be {{height: {vision.image_size}, "
                              f"width: {vision.image_size}}} (the vision tower's image_size)")
    for key in ("do_resize", "do_rescale", "do_normalize", "do_convert_rgb"):
        if pc.get(key, True) is not True:
            raise CheckpointError(f"{path}: {key} {pc.get(key)!r} not supported (only true)")
    if pc.get("do_center_crop"):
        raise CheckpointError(f"{path}: do_center_crop true not supported (frames are resized)")
    rescale = pc.get("rescale_factor", 1 / 255)
    if not isinstance(rescale, (int, float)) or abs(rescale * 255 - 1) > 1e-12:
        raise CheckpointError(f"{path}: rescale_factor {rescale!r} not supported (only 1/255)")
    resample = PIL_RESAMPLE_NAMES.get(pc.get("resample", PIL_RESAMPLE_IDS["bicubic"]))
    if resample not in ("bicubic", "bilinear"):
        raise CheckpointError(f"{path}: resample {pc.get('resample')!r} not supported "
                              f"(bicubic 3 or bilinear 2)")
    mean, std = pc.get("image_mean", CLIP_MEAN), pc.get("image_std", CLIP_STD)
    for key, v in (("image_mean", mean), ("image_std", std)):
        if not (isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, float)) for x in v)):
            raise CheckpointError(f"{path}: {key} must be a list of 3 numbers, got {v!r}")
    return {"size": vision.image_size, "resample": resample, "resize_arithmetic": "torch",
            "mean": [float(x) for x in mean], "std": [float(x) for x in std], "pool_stride": 2}


def with_image_mode(pre, mode, cfg):
    return base.with_mode(pre, mode)


def load_checkpoint(folder, load_weights=True, raw=None):
    """With the manifest's "video" section (load_video_processor)."""
    return llava.load_checkpoint(_SELF, folder, load_weights, raw)


# ---- export --------------------------------------------------------------------------------

def export_problem(ckpt):
    if ckpt.config.vision.select_strategy != "full":
        # SigLIP has no CLS token: "default" would drop a real patch and break the 27 x 27 grid
        # every packing and reduction works on (the released checkpoints all use "full").
        return (f"{ckpt.folder}: vision_feature_select_strategy "
                f"{ckpt.config.vision.select_strategy!r} is not supported for llava-onevision "
                f"(SigLIP has no CLS token; only \"full\")")
    return None


def image_section(cfg, image):
    llava.pinpoints_image_section(cfg, image)
    # "anyres_max_9": the unpadded tile grid is downscaled past 9 tiles' worth of tokens
    image["vision_aspect_ratio"] = cfg.raw.get("vision_aspect_ratio") or "anyres_max_9"
    return image


# ---- tiny checkpoint (make_tiny_llava.py --arch llava-onevision: transformers writes it) ---

TRANSFORMERS_VERSION = None
TINY_MAX_POSITIONS = 2048
PROCESSOR_CLASS = "LlavaOnevisionProcessor"
TINY_PREPROCESSOR = None
make_tiny = make_tiny_onevision.make
tiny_config = None
