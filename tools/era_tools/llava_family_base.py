"""What the LLaVA-style families share (era_tools.families: llava15, llava_next, llava_onevision):
a CLIP or SigLIP tower, the two-layer GELU projector (with `image_newline` where the family has
one), the llava-hf tensor layout of checkpoint_base, and the family hooks that do nothing beyond
the common sections. A family module imports the hooks it has no reason to change under their
hook names and writes only what differs; no family is named here (the ones that depend on the
family read it from the config its family read, `LlavaConfig.family`, or take it as an argument).
"""
from . import checkpoint_base as base
from .llava_model import build_llava_projector
from .siglip_tower import build_clip_or_siglip

# What LlavaConfig assumes for fields config.json may leave out, in LLaVA-1.5 and NeXT (a LLaMA
# decoder, the CLIP tower's penultimate layer without its CLS token).
LLAMA_CLIP_DEFAULTS = {"text_type": "llama", "vision_type": "clip_vision_model",
                       "feature_layer": -2, "strategy": "default", "image_token": 32000}


# ---- config and processor ------------------------------------------------------------------

def check_vision(strategy, vision_type, path):
    """Nothing beyond the common checks."""


def read_pinpoints(raw, vision, path):
    """No anyres pinpoints."""
    return None


def read_video_token(raw, text, image_token, path):
    """No video token."""
    return -1


def load_clip_preprocessor(folder, vision, cfg, arch, anyres):
    """The checkpoint's CLIPImageProcessor / LlavaImageProcessor / LlavaNextImageProcessor
    (base.parse_preprocessor); without one, LLaVA's own "pad" preprocessing (anyres for NeXT) at
    the tower's size."""
    pc, path = base.read_image_processor(folder)
    if pc is None:
        return base.Preprocessor(crop_size=vision.image_size, shortest_edge=vision.image_size,
                                 mode="anyres" if anyres else "pad")
    return base.parse_preprocessor(pc, path, vision, cfg, arch, anyres=anyres)


def load_checkpoint(family, folder, load_weights=True, raw=None):
    """`family`'s LlavaCheckpoint of `folder`: its config and image processor read by the family
    (family.load_config, family.load_preprocessor), its "video" section by
    family.load_video_processor where it has one."""
    cfg = family.load_config(folder, base.read_config(folder) if raw is None else raw)
    pre = family.load_preprocessor(folder, cfg.vision, cfg)
    return base.load_llava_checkpoint(folder, cfg, pre, load_weights,
                                      video=getattr(family, "load_video_processor", None))


# ---- weights -------------------------------------------------------------------------------

def expected_shapes(cfg):
    """The llava-hf layout's shapes, with `image_newline` where cfg's family has one."""
    return base.llava_expected_shapes(cfg, cfg.family.IMAGE_NEWLINE)


split_state_dict = base.split_state_dict
checkpoint_name = base.checkpoint_name


# ---- modules -------------------------------------------------------------------------------

def build_vision(ckpt, dtype, attention):
    return build_clip_or_siglip(ckpt, dtype, attention)


def build_projector(ckpt, dtype):
    return build_llava_projector(ckpt, dtype, image_newline=ckpt.config.family.IMAGE_NEWLINE)


# ---- export --------------------------------------------------------------------------------

def export_problem(ckpt):
    """Why this checkpoint cannot be exported (a message), or None."""
    return None


def image_section(cfg, image):
    """The family's part of the manifest's "image" section (in place): nothing."""
    return image


def pinpoints_image_section(cfg, image):
    """The "image" section of an anyres family (in place): its pinpoints."""
    # (height, width) pairs, HF's reading, in config.json's order (the order breaks ties)
    image["grid_pinpoints"] = [list(p) for p in cfg.grid_pinpoints]
    return image


def manifest_sections(ckpt, manifest):
    """The family's own manifest sections (in place): none beyond the common ones."""
    return manifest


def probe_extras(cfg, gen, T0):
    """export_llava's probe inputs beyond the common ones: none."""
    return {}


def random_init(canon):
    """(mean, std) of a random tensor make_random_bundle cannot name in the llava-hf layout."""
    return None

