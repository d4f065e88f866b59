"""Reference LLaVA-NeXT "anyres" image handling, written as HF transformers' LlavaNext does it.

This is the independent Python reference the C++ anyres preprocessing and packing are tested
against (see /work/shared/reference/llava.md A.6). Sizes are (height, width) everywhere, and the
pinpoints are read as (height, width) pairs, as HF reads config.json's image_grid_pinpoints (the
original LLaVA code reads the same list as (width, height), which only changes the choice
between the two 2-tile layouts for images of at most ~336 px).

Preprocessing (LlavaNextImageProcessor, PIL backend):
  select_best_resolution -> aspect-preserving resize (ceil fit, PIL bicubic) -> black pad
  (odd pixel right/bottom) -> tile x tile patches, row-major -> the original image squashed to
  tile x tile as the base crop, first -> rescale/normalise every crop (pil_reference.normalize).
Packing (LlavaNextModel.pack_image_features, strategy "default", image_newline present):
  base features first; tile features view(rows, cols, p, p, D) -> permute to a (D, rows*p,
  cols*p) grid -> unpad_image (HF's int(round(x, 7))) -> one image_newline column appended ->
  flattened row-major.
"""
import math

import numpy as np
import torch

from . import pil_reference


# ------------------------------------------------------------------------------------------------
# geometry

def select_best_resolution(original_size, possible_resolutions):
    """HF's select_best_resolution. original_size: (height, width); possible_resolutions:
    [(height, width), ...]. Most effective (kept) pixels, then least waste; first wins ties."""
    original_height, original_width = original_size
    best_fit = None
    max_effective_resolution = 0
    min_wasted_resolution = float("inf")
    for height, width in possible_resolutions:
        scale = min(width / original_width, height / original_height)
        downscaled_width = int(original_width * scale)
        downscaled_height = int(original_height * scale)
        effective_resolution = min(downscaled_width * downscaled_height,
                                   original_width * original_height)
        wasted_resolution = (width * height) - effective_resolution
        if effective_resolution > max_effective_resolution or (
                effective_resolution == max_effective_resolution
                and wasted_resolution < min_wasted_resolution):
            max_effective_resolution = effective_resolution
            min_wasted_resolution = wasted_resolution
            best_fit = (height, width)
    return best_fit


def patch_output_size(original_size, target_resolution):
    """HF's _get_patch_output_size: the aspect-preserving fit of the image into the target,
    (new_height, new_width), the free side rounded up (ceil) and clamped."""
    original_height, original_width = original_size
    target_height, target_width = target_resolution
    scale_w = target_width / original_width
    scale_h = target_height / original_height
    if scale_w < scale_h:
        new_width = target_width
        new_height = min(math.ceil(original_height * scale_w), target_height)
    else:
        new_height = target_height
        new_width = min(math.ceil(original_width * scale_h), target_width)
    return new_height, new_width


def grid_shape(original_size, pinpoints, tile):
    """HF's get_anyres_image_grid_shape: (rows, cols) of tiles of the chosen pinpoint."""
    height, width = select_best_resolution(original_size, pinpoints)
    return height // tile, width // tile


def unpad_box(original_size, grid_height, grid_width):
    """Rows [top, bottom) and columns [left, right) of a grid_height x grid_width token grid that
    HF's unpad_image keeps for an image of original_size (height, width)."""
    original_height, original_width = original_size
    original_aspect_ratio = original_width / original_height
    current_aspect_ratio = grid_width / grid_height
    if original_aspect_ratio > current_aspect_ratio:
        scale_factor = grid_width / original_width
        new_height = int(round(original_height * scale_factor, 7))
        padding = (grid_height - new_height) // 2
        return {"top": padding, "bottom": grid_height - padding, "left": 0, "right": grid_width}
    scale_factor = grid_height / original_height
    new_width = int(round(original_width * scale_factor, 7))
    padding = (grid_width - new_width) // 2
    return {"top": 0, "bottom": grid_height, "left": padding, "right": grid_width - padding}


def token_count(original_size, pinpoints, tile, patches_per_side):
    """Tokens of the packed sequence: p*p (base) + kept rows * (kept cols + 1 newline). This is
    the arithmetic of HF's processor (_get_number_of_features); see pack_image_features for the
    tensor path."""
    rows, cols = grid_shape(original_size, pinpoints, tile)
    p = patches_per_side
    box = unpad_box(original_size, rows * p, cols * p)
    kept_rows, kept_cols = box["bottom"] - box["top"], box["right"] - box["left"]
    return p * p + kept_rows * (kept_cols + 1)


# ------------------------------------------------------------------------------------------------
# preprocessing (Pillow, as LlavaNextImageProcessor with PIL resampling)

def resize_for_patching(img, target_resolution):
    """PIL RGB image -> uint8 HWC array, resized (bicubic) to fit target_resolution (h, w)."""
    new_height, new_width = patch_output_size((img.size[1], img.size[0]), target_resolution)
    return np.asarray(pil_reference.resize_bicubic(img, new_width, new_height), dtype=np.uint8)


def pad_for_patching(array, target_resolution):
    """HF's _pad_for_patching: zero (black) padding, (p, p + remainder) per axis."""
    target_height, target_width = target_resolution
    new_height, new_width = array.shape[:2]
    paste_x, r_x = divmod(target_width - new_width, 2)
    paste_y, r_y = divmod(target_height - new_height, 2)
    return np.pad(array, ((paste_y, paste_y + r_y), (paste_x, paste_x + r_x), (0, 0)),
                  mode="constant", constant_values=0)


def divide_to_patches(array, patch_size):
    """HF's divide_to_patches: tiles row-major (top to bottom, left to right)."""
    height, width = array.shape[:2]
    patches = []
    for i in range(0, height, patch_size):
        for j in range(0, width, patch_size):
            patches.append(array[i:i + patch_size, j:j + patch_size])
    return patches


def anyres_crops(img, pinpoints, tile):
    """PIL RGB image -> (best (h, w), [base, tile_0, ..., tile_{n-1}] as uint8 HWC arrays)."""
    original_size = (img.size[1], img.size[0])
    best = select_best_resolution(original_size, pinpoints)
    padded = pad_for_patching(resize_for_patching(img, best), best)
    patches = divide_to_patches(padded, tile)
    base = np.asarray(pil_reference.resize_bicubic(img, tile, tile), dtype=np.uint8)
    return best, [base] + patches


def preprocess_anyres(img, pinpoints, tile=336, mean=pil_reference.CLIP_MEAN,
                      std=pil_reference.CLIP_STD):
    """PIL RGB image -> (pixel_values float32 [1+rows*cols, 3, tile, tile], best (h, w)). The
    per-crop resize to shortest edge `tile` and centre crop `tile` of HF's _preprocess are no-ops
    on tile x tile crops, so only rescale + normalise remain."""
    best, crops = anyres_crops(img, pinpoints, tile)
    pixels = np.stack([pil_reference.normalize(c, mean, std) for c in crops])
    return np.ascontiguousarray(pixels, dtype=np.float32), best


# ------------------------------------------------------------------------------------------------
# packing (LlavaNextModel.pack_image_features for one image)

def unpad_image(tensor, original_size):
    """HF's unpad_image on a (D, H, W) grid."""
    original_height, original_width = original_size
    current_height, current_width = tensor.shape[1:]
    original_aspect_ratio = original_width / original_height
    current_aspect_ratio = current_width / current_height
    if original_aspect_ratio > current_aspect_ratio:
        scale_factor = current_width / original_width
        new_height = int(round(original_height * scale_factor, 7))
        padding = (current_height - new_height) // 2
        return tensor[:, padding:current_height - padding, :]
    scale_factor = current_height / original_height
    new_width = int(round(original_width * scale_factor, 7))
    padding = (current_width - new_width) // 2
    return tensor[:, :, padding:current_width - padding]


def pack_image_features(image_feature, original_size, pinpoints, tile, patches_per_side,
                        image_newline):
    """image_feature [1+rows*cols, p*p, D] (projected; base crop first) -> [T, D]."""
    if image_feature.shape[0] > 1:
        base_image_feature = image_feature[0]
        image_feature = image_feature[1:]
        height = width = patches_per_side
        num_patch_height, num_patch_width = grid_shape(original_size, pinpoints, tile)
        if image_feature.shape[0] != num_patch_height * num_patch_width:
            raise ValueError(f"{image_feature.shape[0]} tile crops, the grid is "
                             f"{num_patch_height}x{num_patch_width}")
        image_feature = image_feature.view(num_patch_height, num_patch_width, height, width, -1)
        image_feature = image_feature.permute(4, 0, 2, 1, 3).contiguous()
        image_feature = image_feature.flatten(1, 2).flatten(2, 3)  # (D, rows*p, cols*p)
        image_feature = unpad_image(image_feature, original_size)
        newline = image_newline[:, None, None].expand(*image_feature.shape[:-1], 1)
        image_feature = torch.cat((image_feature, newline.to(image_feature.dtype)), dim=-1)
        image_feature = image_feature.flatten(1, 2).transpose(0, 1)
        return torch.cat((base_image_feature, image_feature), dim=0)
    # a single crop (not reachable with pinpoints larger than one tile): base + one newline
    return torch.cat((image_feature[0], image_newline[None].to(image_feature.dtype)), dim=0)


__all__ = ["select_best_resolution", "patch_output_size", "grid_shape", "unpad_box",
           "token_count", "anyres_crops", "preprocess_anyres", "unpad_image",
           "pack_image_features"]
