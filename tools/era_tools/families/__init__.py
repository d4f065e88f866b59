"""The model families era exports, and the one place that tells them apart.

Each family is a module of this package holding everything era knows about it: reading its
config.json and processors, its tensor layout and expected shapes, building its modules, its
manifest sections, its tiny test checkpoint:

  llava15           "llava-1.5"        LlavaForConditionalGeneration            model_type llava
  llava_next        "llava-next"       LlavaNextForConditionalGeneration        llava_next
  llava_onevision   "llava-onevision"  LlavaOnevisionForConditionalGeneration   llava_onevision
  qwen2_5_vl        "qwen2.5-vl"       Qwen2_5_VLForConditionalGeneration       qwen2_5_vl

The shared layers (checkpoint_base, safetensors_io, llava_model, the towers, prompt_template,
era_ops, and llava_family_base: the hooks the LLaVA-style families have in common) know no
family; code that has to pick one looks it up here: by the manifest's arch
(`get`), by config.json's model_type / architectures (`of_config`, `of_hf_class`), or lets the
registry read the folder (`load_config`, `load_checkpoint`). A config read by a family carries it
(`LlavaConfig.family`), which is how llava_model's builders reach the family's modules without
importing this package.
"""
import os

from ..checkpoint_base import (IMAGE_MODES, ORIGINAL_LLAVA_TYPES, CheckpointError, check_folder,
                               image_mode_checked, read_config)
from . import llava15, llava_next, llava_onevision, qwen2_5_vl

FAMILIES = (llava15, llava_next, llava_onevision, qwen2_5_vl)
BY_ARCH = {f.ARCH: f for f in FAMILIES}
BY_MODEL_TYPE = {f.MODEL_TYPE: f for f in FAMILIES}
BY_HF_CLASS = {f.HF_CLASS: f for f in FAMILIES}
ARCHES = tuple(BY_ARCH)  # "llava-1.5", "llava-next", "llava-onevision", "qwen2.5-vl"


def get(arch):
    """The family of a manifest arch ("llava-1.5", ...); ValueError for another name."""
    try:
        return BY_ARCH[arch]
    except (KeyError, TypeError):
        raise ValueError(f"unknown arch {arch!r} (one of {', '.join(ARCHES)})") from None


def of_hf_class(name):
    """The family of a transformers class name (config.json architectures), or None."""
    return BY_HF_CLASS.get(name)


def of_config(raw, path):
    """The family of a config.json (`raw`, read from `path`): by model_type, its architectures
    (when listed) naming the family's class. CheckpointError names what the file is instead."""
    model_type = raw.get("model_type")
    archs = raw.get("architectures") or []
    if model_type in ORIGINAL_LLAVA_TYPES:
        # haotian-liu/LLaVA's own layout (LlavaLlamaForCausalLM, mm_projector.*, an mm_vision_tower
        # name instead of a vision_config): transformers' conversion scripts turn it into the
        # llava-hf layout this exporter reads.
        script = ("convert_llava_next_weights_to_hf.py" if "image_grid_pinpoints" in raw
                  else "convert_llava_weights_to_hf.py")
        raise CheckpointError(
            f"{path}: model_type {model_type!r} is an original LLaVA checkpoint (haotian-liu/LLaVA layout), "
            f"not the llava-hf layout era exports. Convert it first with transformers' {script} "
            f"(transformers/models/{'llava_next' if 'next' in script else 'llava'}/{script}), or use the "
            f"llava-hf copy of the model (e.g. llava-hf/llava-1.5-7b-hf, llava-hf/llava-v1.6-vicuna-7b-hf)")
    family = BY_MODEL_TYPE.get(model_type)
    if family is not None and (getattr(family, "OWN_CLASS_ERROR", False) or not archs
                               or family.HF_CLASS in archs):
        return family
    labels = [f.LABEL for f in FAMILIES]
    expected = [f"'{f.MODEL_TYPE}' / {f.HF_CLASS}" for f in FAMILIES]
    raise CheckpointError(
        f"{path}: not a {', '.join(labels[:-2])}, {labels[-2]} or {labels[-1]} checkpoint "
        f"(model_type={model_type!r}, architectures={archs!r}; expected model_type "
        f"{', '.join(expected[:-2])} or {expected[-2]}, or {expected[-1]})")


def load_config(folder):
    """config.json of `folder` -> LlavaConfig, read by its family."""
    raw = read_config(folder)
    return of_config(raw, os.path.join(folder, "config.json")).load_config(folder, raw)


def load_checkpoint(folder, load_weights=True):
    """Validate `folder` and return its family's LlavaCheckpoint (with tensors unless
    load_weights=False)."""
    folder = check_folder(folder)
    raw = read_config(folder)
    family = of_config(raw, os.path.join(folder, "config.json"))
    return family.load_checkpoint(folder, load_weights, raw)


def load_preprocessor(folder, vision, cfg):
    """The image processor of `folder` as `cfg`'s family reads it (cfg.arch names the family)."""
    return get(cfg.arch).load_preprocessor(folder, vision, cfg)


def expected_shapes(cfg):
    """Canonical name -> shape for everything the exported modules need, per part."""
    return get(cfg.arch).expected_shapes(cfg)


def with_image_mode(pre, mode, cfg):
    """`pre` with its mode overridden by the exporter's --image-mode (None keeps the
    checkpoint's), where cfg's family allows it (NeXT has one mode, anyres)."""
    if mode is None:
        return pre
    return get(cfg.arch).with_image_mode(pre, image_mode_checked(mode), cfg)


__all__ = ["FAMILIES", "ARCHES", "IMAGE_MODES", "get", "of_hf_class", "of_config",
           "load_config", "load_checkpoint", "load_preprocessor", "expected_shapes",
           "with_image_mode"]
