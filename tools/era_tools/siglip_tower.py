"""SigLIP vision tower (LLaVA-OneVision / LLaVA-Video), `torch.jit.script`-able under 1.13 and 2.x.

The same contract as llava_model.VisionTower, so the bundle's vision.pt has one interface for both
towers: pixels [B,3,S,S] float32 -> (features, CLS logits, CLS probs, mean logits, mean probs,
CLS feature, mean keys). What differs from CLIP, following transformers' SiglipVisionModel:
  - the patch convolution has a bias; the position embedding has one row per patch (no CLS token);
    there is no pre-layernorm;
  - the MLP's activation is GELU with the tanh approximation (`gelu_pytorch_tanh`);
  - LLaVA-OneVision reads `hidden_states[vision_feature_layer]`, which never passes through
    post_layernorm, and SiglipVisionModel's attention-pooling head is unused (`vision_use_head`
    false in the llava-hf configs), so neither is part of the tower.

The encoder is llava_model's CLIPEncoder: its layers take SigLIP's MLP activation and, with
`has_cls` false, read the saliency over all tokens. SigLIP has no CLS token, so there is no CLS
attention row for ERA's DEP saliency: the CLS outputs
are empty ([B,H,0], [B,0]) and the CLS-free "mean" readout is the saliency: the deepest selected
layer's attention averaged over all N query rows (logits; and each row's softmax over all N keys,
averaged), the paper's own CLS-free ablation readout (`readout=mean`); the shared decision table
(../shared/reference/era.md, section 7) leaves the source open for towers without a CLS token.
"""
from typing import Tuple

import torch
import torch.nn as nn

from .llava_model import CLIPEncoder, VisionTower, assign_weights


class SiglipEmbeddings(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        C, P = cfg.hidden_size, cfg.patch_size
        self.patch_embedding = nn.Conv2d(cfg.num_channels, C, P, stride=P, bias=True, **kw)
        self.position_embedding = nn.Embedding(cfg.num_patches, C, **kw)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch_embedding(pixel_values.to(self.patch_embedding.weight.dtype))
        x = x.flatten(2).transpose(1, 2)  # [B, N, C], raster order
        return x + self.position_embedding.weight.unsqueeze(0)


class SiglipVisionTower(nn.Module):
    """pixels [B,3,S,S] float32 -> (features [B,N',C] model dtype, CLS logits [B,H,0], CLS probs
    [B,H,0], mean logits [B,H,N] f32, mean probs [B,H,N] f32, CLS feature [B,0], mean keys
    [B,N,head_dim] f32). Features are HF `hidden_states[feature_layer]`; under the "default"
    select strategy transformers drops the first token even though SigLIP has no CLS (N' = N-1),
    and era does the same so the features match; OneVision's configs say "full" (N' = N)."""

    def __init__(self, cfg, attention="math", device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.embeddings = SiglipEmbeddings(cfg, **kw)
        self.encoder = CLIPEncoder(cfg, attention=attention, **kw)
        self.first_token = 0 if cfg.select_strategy == "full" else 1

    def forward(self, pixel_values: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor, torch.Tensor]:
        features, _, no_cls, mean_logits, mean_probs, mean_keys = self.encoder(
            self.embeddings(pixel_values))
        B = pixel_values.shape[0]
        no_cls_feature = torch.zeros(B, 0, device=pixel_values.device, dtype=features.dtype)
        return (features[:, self.first_token:].contiguous(), no_cls, no_cls, mean_logits.contiguous(),
                mean_probs.contiguous(), no_cls_feature, mean_keys.contiguous())


def build_clip_or_siglip(ckpt, dtype, attention):
    """A LLaVA-style family's tower: CLIP's VisionTower (a CLS token) or SiglipVisionTower (none),
    by the vision_config's model_type, with ckpt.vision's weights."""
    vision = ckpt.config.vision
    cls = VisionTower if getattr(vision, "has_cls", True) else SiglipVisionTower
    module = cls(vision, attention=attention, device="meta", dtype=dtype)
    return assign_weights(module, ckpt.vision, dtype, "vision tower")
