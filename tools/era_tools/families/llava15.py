"""LLaVA-1.5 (`LlavaForConditionalGeneration`, config.json model_type "llava", e.g.
llava-hf/llava-1.5-7b-hf): a CLIP tower (CLS dropped, hidden_states[-2]), a two-layer GELU
projector, a LLaMA / Mistral decoder with its SentencePiece tokenizer.model; one 336 x 336 crop
per image, LLaVA's "pad" (expand2square) or the CLIP processor's "crop".

What this family knows: its config defaults, which image processors fit it, the llava-hf tensor
layout (checkpoint_base), its modules, the manifest (nothing beyond the common sections) and the
tiny test checkpoint make_tiny_llava.py writes for it.
"""
import sys

from .. import checkpoint_base as base
from .. import llava_family_base as llava
from ..checkpoint_base import CLIP_MEAN, CLIP_STD, LLAVA_DEFAULT_VISION, CheckpointError
# the family's hooks, as every LLaVA-style family has them
from ..llava_family_base import (build_projector, build_vision, check_vision,  # noqa: F401
                                 checkpoint_name, expected_shapes, export_problem, image_section,
                                 manifest_sections, probe_extras, random_init, read_pinpoints,
                                 read_video_token, split_state_dict)

ARCH = "llava-1.5"
LABEL = "LLaVA-1.5"
MODEL_TYPE = "llava"
HF_CLASS = "LlavaForConditionalGeneration"
# What LlavaConfig assumes for fields config.json may leave out.
DEFAULTS = llava.LLAMA_CLIP_DEFAULTS
DEFAULT_VISION = LLAVA_DEFAULT_VISION   # LlavaConfig's CLIP-L/14-336 without a vision_config
IMAGE_NEWLINE = False                   # no image_newline parameter
DEFAULT_TEMPLATE = None                 # prompt_template.default_template decides
LLAMA_TEXT_MODEL = True                 # make_random_bundle --text-model can write the decoder
FIXED_IMAGE_MODE = None                 # --image-mode pad / crop both apply

_SELF = sys.modules[__name__]


# ---- config, processor and weights ---------------------------------------------------------

def load_config(folder, raw):
    return base.load_llava_config(folder, raw, _SELF)


def load_preprocessor(folder, vision, cfg=None):
    """The checkpoint's CLIPImageProcessor / LlavaImageProcessor (base.parse_preprocessor);
    without one, LLaVA's own "pad" preprocessing at the tower's size."""
    return llava.load_clip_preprocessor(folder, vision, cfg, ARCH, anyres=False)


def with_image_mode(pre, mode, cfg):
    return base.with_mode(pre, mode)


def load_checkpoint(folder, load_weights=True, raw=None):
    return llava.load_checkpoint(_SELF, folder, load_weights, raw)


# ---- tiny checkpoint (make_tiny_llava.py) --------------------------------------------------

TRANSFORMERS_VERSION = "4.36.0"
TINY_MAX_POSITIONS = 2048
PROCESSOR_CLASS = "LlavaProcessor"
make_tiny = None  # make_tiny_llava.py writes it itself (tiny_config below)
# CLIPImageProcessor, as in llava-hf/llava-1.5-7b-hf
TINY_PREPROCESSOR = {
    "crop_size": {"height": 336, "width": 336}, "do_center_crop": True, "do_convert_rgb": True,
    "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": CLIP_MEAN,
    "image_processor_type": "CLIPImageProcessor", "image_std": CLIP_STD,
    "processor_class": "LlavaProcessor", "resample": 3, "rescale_factor": 1 / 255,
    "size": {"shortest_edge": 336},
}


def tiny_config(text, vision, image_token, pad_token, vocab, dtype):
    """config.json of the tiny checkpoint around make_tiny_llava's text / vision configs."""
    return {
        "architectures": [HF_CLASS], "model_type": MODEL_TYPE,
        "ignore_index": -100, "image_token_index": image_token, "pad_token_id": pad_token,
        "projector_hidden_act": "gelu", "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default", "tie_word_embeddings": False,
        "text_config": text, "vision_config": vision, "vocab_size": vocab,
        "torch_dtype": dtype, "transformers_version": TRANSFORMERS_VERSION,
    }


__all__ = ["ARCH", "MODEL_TYPE", "HF_CLASS", "CheckpointError", "load_config", "load_checkpoint",
           "load_preprocessor", "expected_shapes", "build_vision", "build_projector"]
