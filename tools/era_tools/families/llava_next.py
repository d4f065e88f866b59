"""LLaVA-NeXT / v1.6 (`LlavaNextForConditionalGeneration`, config.json model_type "llava_next",
e.g. llava-hf/llava-v1.6-vicuna-7b-hf): LLaVA-1.5's modules plus one tensor, `image_newline`
[text hidden] (`model.image_newline` in the transformers >= 4.52 layout), which belongs to the
projector part (canonical name `image_newline`): the exported projector carries it. Images are
"anyres": a base crop plus tiles laid out on the best of `image_grid_pinpoints`.

NeXT's `image_grid_pinpoints` are kept exactly as config.json lists them: HF reads every pair as
(height, width) (the original LLaVA code read the same list as (width, height)); the processor's
copy, when present, must be the same list.
"""
import sys

from .. import checkpoint_base as base
from .. import llava_family_base as llava
from ..checkpoint_base import CLIP_MEAN, CLIP_STD, LLAVA_DEFAULT_VISION, CheckpointError
# the family's hooks, as every LLaVA-style family has them
from ..llava_family_base import (build_projector, build_vision,  # noqa: F401
                                 checkpoint_name, expected_shapes, export_problem,
                                 manifest_sections, probe_extras, random_init, read_video_token,
                                 split_state_dict)
from ..llava_family_base import pinpoints_image_section as image_section  # noqa: F401

ARCH = "llava-next"
LABEL = "LLaVA-NeXT"
MODEL_TYPE = "llava_next"
HF_CLASS = "LlavaNextForConditionalGeneration"
DEFAULTS = llava.LLAMA_CLIP_DEFAULTS
DEFAULT_VISION = LLAVA_DEFAULT_VISION
# LlavaNextConfig's default image_grid_pinpoints (also what llava-v1.6 config.json files list).
NEXT_DEFAULT_PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]
IMAGE_NEWLINE = True
DEFAULT_TEMPLATE = None
LLAMA_TEXT_MODEL = True
# --image-mode does not apply: NeXT has one mode
FIXED_IMAGE_MODE = "LLaVA-NeXT always uses anyres tiles"

_SELF = sys.modules[__name__]


# ---- config, processor and weights ---------------------------------------------------------

def check_vision(strategy, vision_type, path):
    if strategy == "full" and vision_type == "clip_vision_model":
        # LlavaNextModel.pack_image_features views every tile's tokens as a 24 x 24 grid: with
        # the CLS token kept the view fails in transformers itself, so no such checkpoint runs.
        raise CheckpointError(f"{path}: vision_feature_select_strategy 'full' is not supported "
                              f"for llava_next (transformers' anyres packing needs exactly one "
                              f"token per patch)")


def read_pinpoints(raw, vision, path):
    return base.parse_pinpoints(raw.get("image_grid_pinpoints", NEXT_DEFAULT_PINPOINTS),
                                vision.image_size, f"{path}: image_grid_pinpoints")


def load_config(folder, raw):
    return base.load_llava_config(folder, raw, _SELF)


def load_preprocessor(folder, vision, cfg=None):
    """The checkpoint's LlavaNextImageProcessor (base.parse_preprocessor, anyres); without one,
    anyres at the tower's size."""
    return llava.load_clip_preprocessor(folder, vision, cfg, ARCH, anyres=True)


def with_image_mode(pre, mode, cfg):
    raise CheckpointError(f"--image-mode {mode} applies to LLaVA-1.5 only ({FIXED_IMAGE_MODE})")


def load_checkpoint(folder, load_weights=True, raw=None):
    return llava.load_checkpoint(_SELF, folder, load_weights, raw)


# ---- tiny checkpoint (make_tiny_llava.py) --------------------------------------------------

TRANSFORMERS_VERSION = "4.39.0.dev0"
TINY_MAX_POSITIONS = 4096  # a NeXT image alone is up to 2928 tokens
PROCESSOR_CLASS = "LlavaNextProcessor"
make_tiny = None
# llava-hf's v1.6 pinpoints, each pair (height, width) as HF reads it.
NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))
# LlavaNextImageProcessor, as in llava-hf/llava-v1.6-vicuna-7b-hf
TINY_PREPROCESSOR = {
    "aspect_ratio_setting": "anyres", "crop_size": {"height": 336, "width": 336},
    "do_center_crop": True, "do_convert_rgb": True, "do_normalize": True, "do_pad": True,
    "do_rescale": True, "do_resize": True,
    "image_grid_pinpoints": [list(p) for p in NEXT_PINPOINTS], "image_mean": CLIP_MEAN,
    "image_processor_type": "LlavaNextImageProcessor", "image_std": CLIP_STD,
    "processor_class": "LlavaNextProcessor", "resample": 3, "rescale_factor": 1 / 255,
    "size": {"shortest_edge": 336},
}


def tiny_config(text, vision, image_token, pad_token, vocab, dtype):
    """as llava-hf/llava-v1.6-vicuna-7b-hf's config.json (LlavaNextConfig)"""
    text["_name_or_path"] = "era/tiny-vicuna-v1.5"
    return {
        "architectures": [HF_CLASS], "model_type": MODEL_TYPE,
        "ignore_index": -100, "image_grid_pinpoints": [list(p) for p in NEXT_PINPOINTS],
        "image_token_index": image_token, "pad_token_id": pad_token,
        "projector_hidden_act": "gelu", "use_image_newline_parameter": True,
        "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
        "tie_word_embeddings": False, "text_config": text, "vision_config": vision,
        "vocab_size": vocab, "torch_dtype": dtype,
        "transformers_version": TRANSFORMERS_VERSION,
    }
