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

SigLIP has no CLS token, so there is no CLS attention row for ERA's DEP saliency: the CLS outputs
are empty ([B,H,0], [B,0]) and the CLS-free "mean" readout is the saliency: the deepest selected
layer's attention averaged over all N query rows (logits; and each row's softmax over all N keys,
averaged), the paper's own CLS-free ablation readout (`readout=mean`); the shared decision table
(../shared/reference/era.md, section 7) leaves the source open for towers without a CLS token.
"""
from typing import List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


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


class SiglipAttention(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        C = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.head_dim = C // cfg.num_heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(C, C, **kw)
        self.k_proj = nn.Linear(C, C, **kw)
        self.v_proj = nn.Linear(C, C, **kw)
        self.out_proj = nn.Linear(C, C, **kw)

    def forward(self, x: torch.Tensor, need_saliency: bool
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (output, mean_logits [B,H,N], mean_probs [B,H,N], mean_keys [B,N,head_dim]); the
        saliency tensors are float32, recomputed from the model-dtype q/k (fp16 scores are too
        coarse to rank tokens), and empty unless need_saliency."""
        B, N, C = x.shape
        q = self.q_proj(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, N, C)
        if need_saliency:
            full = torch.matmul(q.float(), k.float().transpose(-1, -2)) * self.scale  # [B,H,N,N]
            mean_logits = full.mean(dim=2)
            mean_probs = torch.softmax(full, dim=-1).mean(dim=2)
            mean_keys = k.float().mean(dim=1)
        else:
            mean_logits = torch.zeros(0, device=x.device)
            mean_probs = mean_logits
            mean_keys = mean_logits
        return self.out_proj(out), mean_logits, mean_probs, mean_keys


class SiglipMLP(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, **kw)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class SiglipEncoderLayer(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.layer_norm1 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, **kw)
        self.self_attn = SiglipAttention(cfg, **kw)
        self.layer_norm2 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, **kw)
        self.mlp = SiglipMLP(cfg, **kw)

    def forward(self, x: torch.Tensor, need_saliency: bool
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        h, mean_logits, mean_probs, mean_keys = self.self_attn(self.layer_norm1(x), need_saliency)
        x = x + h
        x = x + self.mlp(self.layer_norm2(x))
        return x, mean_logits, mean_probs, mean_keys


class SiglipEncoder(nn.Module):
    """Only the layers up to the deepest feature layer exist (see llava_model.CLIPEncoder)."""

    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        self.layers = nn.ModuleList(
            [SiglipEncoderLayer(cfg, device=device, dtype=dtype) for _ in range(cfg.layers_run)])
        self.num_layers = cfg.layers_run
        self.feature_indices: List[int] = list(cfg.feature_indices)

    def forward(self, x: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mean_logits = torch.zeros(0, device=x.device)
        mean_probs, mean_keys = mean_logits, mean_logits
        states: List[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            last = i == self.num_layers - 1
            x, ml, mp, mk = layer(x, last)
            states.append(x)
            if last:
                mean_logits, mean_probs, mean_keys = ml, mp, mk
        selected = torch.cat([states[k - 1] for k in self.feature_indices], dim=-1)
        return selected, mean_logits, mean_probs, mean_keys


class SiglipVisionTower(nn.Module):
    """pixels [B,3,S,S] float32 -> (features [B,N',C] model dtype, CLS logits [B,H,0], CLS probs
    [B,H,0], mean logits [B,H,N] f32, mean probs [B,H,N] f32, CLS feature [B,0], mean keys
    [B,N,head_dim] f32). Features are HF `hidden_states[feature_layer]`; under the "default"
    select strategy transformers drops the first token even though SigLIP has no CLS (N' = N-1),
    and era does the same so the features match; OneVision's configs say "full" (N' = N)."""

    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.embeddings = SiglipEmbeddings(cfg, **kw)
        self.encoder = SiglipEncoder(cfg, **kw)
        self.first_token = 0 if cfg.select_strategy == "full" else 1
        self.num_heads = cfg.num_heads

    def forward(self, pixel_values: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor, torch.Tensor]:
        features, mean_logits, mean_probs, mean_keys = self.encoder(self.embeddings(pixel_values))
        B = pixel_values.shape[0]
        no_cls = torch.zeros(B, self.num_heads, 0, device=pixel_values.device)
        no_cls_feature = torch.zeros(B, 0, device=pixel_values.device, dtype=features.dtype)
        return (features[:, self.first_token:].contiguous(), no_cls, no_cls, mean_logits.contiguous(),
                mean_probs.contiguous(), no_cls_feature, mean_keys.contiguous())
