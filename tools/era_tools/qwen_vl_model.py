"""Qwen2.5-VL's vision tower for era, `torch.jit.script`-able under torch 1.13 and 2.x.

QwenVisionTower is transformers' `Qwen2_5_VisionTransformerPretrainedModel` up to (not including)
the merger MLP, written from its semantics (transformers 5.17):
  - patch embedding: a Conv3d with kernel = stride = (temporal_patch_size, patch, patch), no bias,
    over the processor's flattened patches [Np, 3 * temporal * patch * patch];
  - 2-D rotary embedding over head_dim / 2 frequencies (inv_freq = 1 / theta^(2i / (head_dim/2))):
    the height half then the width half, positions in 2x2 merge-block order per temporal slice,
    the whole [head_dim] duplicated (NeoX rotate_half layout), applied to q / k in float32 and
    cast back;
  - the rows are reordered into window order (transformers' get_vision_window_index: merge units
    grouped into windows of window_size / patch / merge units a side, per temporal slice);
    blocks listed in fullatt_block_indexes attend within each temporal slice of each item, the
    others within each window;
  - block: RMSNorm(1e-6) -> attention (biased qkv / proj, softmax in float32) -> RMSNorm ->
    gated MLP with biases (act = hidden_act, "silu");
  - the merger's ln_q RMSNorm, rows grouped by merge unit -> [Nm, 4C], put back in the
    processor's order. The merger MLP (Linear -> GELU -> Linear) is llava_model.Projector with
    hidden_features = 4C.

The attention loops over its segments (as transformers' non-flash path), so memory is
O(segment^2) per head, never O(N^2) over all the items. The last block's saliency (ERA's "mean"
readout: every query row of a segment averaged, logits and row-softmax probabilities, recomputed
in float32 from the model-dtype q / k) is computed in query chunks of SALIENCY_CHUNK rows.

Contract (manifest vision.* for arch "qwen2.5-vl", BUNDLE_FORMAT.md):
    forward(patches [Np, 3*T*P*P] float32, grid_thw [n, 3] int64) -> (
        features [1, Nm, 4C] model dtype,  cls_logits [1, H, 0], cls_probs [1, H, 0],
        mean_logits [1, H, Nm] f32 (per merge unit: mean of its 4 patches),
        mean_probs [1, H, Nm] f32 (per merge unit: sum of its 4 patches; sums to t per item),
        cls_feature [1, 0], mean_keys [1, Nm, 0])
"""
from typing import List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .llava_model import Linear, LlamaMLP, RMSNorm, cpu_upcast, matmul_f32, rotate_half

SALIENCY_CHUNK = 1024  # query rows per saliency matmul


class QwenPatchEmbed(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kernel = [cfg.temporal_patch_size, cfg.patch_size, cfg.patch_size]
        self.in_channels = cfg.num_channels
        self.temporal_patch_size = cfg.temporal_patch_size
        self.patch_size = cfg.patch_size
        self.hidden_size = cfg.hidden_size
        self.proj = nn.Conv3d(cfg.num_channels, cfg.hidden_size, kernel_size=kernel, stride=kernel,
                              bias=False, device=device, dtype=dtype)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        x = patches.reshape(-1, self.in_channels, self.temporal_patch_size, self.patch_size,
                            self.patch_size)
        return self.proj(x.to(self.proj.weight.dtype)).reshape(-1, self.hidden_size)


def segment_saliency(q: torch.Tensor, k: torch.Tensor, scale: float,
                     chunk: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """q, k [H, L, d] (model dtype, after RoPE) -> (logits, probs) [H, L] float32: the scaled
    q.k logits and the row softmax, each averaged over the L query rows; chunk rows at a time."""
    H, L = q.shape[0], q.shape[1]
    kf = k.float().transpose(-1, -2)
    logit_sum = torch.zeros(H, L, device=q.device)
    prob_sum = torch.zeros(H, L, device=q.device)
    start = 0
    while start < L:
        n = min(chunk, L - start)
        s = torch.matmul(q.narrow(1, start, n).float(), kf) * scale  # [H, n, L]
        logit_sum = logit_sum + s.sum(dim=1)
        prob_sum = prob_sum + torch.softmax(s, dim=-1).sum(dim=1)
        start += n
    return logit_sum / L, prob_sum / L


class QwenVisionAttention(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        C = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.head_dim = C // cfg.num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = Linear(C, 3 * C, bias=True, **kw)
        self.proj = Linear(C, C, bias=True, **kw)
        self.saliency_chunk = SALIENCY_CHUNK
        self.cpu_upcast_min_rows = 0  # see llava_model.Linear

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cu: List[int],
                need_saliency: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [N, C], cos / sin [N, head_dim] float32, cu: segment boundaries (0, ..., N).
        -> (output [N, C], mean logits [H, N] f32, mean probs [H, N] f32; both [H, 0] unless
        need_saliency)."""
        N = x.shape[0]
        qkv = self.qkv(x).reshape(N, 3, self.num_heads, self.head_dim).permute(1, 0, 2, 3)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [N, H, d]
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        qf, kf = q.float(), k.float()
        q = (qf * c + rotate_half(qf) * s).to(x.dtype).transpose(0, 1)  # [H, N, d]
        k = (kf * c + rotate_half(kf) * s).to(x.dtype).transpose(0, 1)
        v = v.transpose(0, 1)
        outs: List[torch.Tensor] = []
        logits: List[torch.Tensor] = []
        probs: List[torch.Tensor] = []
        for i in range(len(cu) - 1):
            a, n = cu[i], cu[i + 1] - cu[i]
            qs, ks, vs = q.narrow(1, a, n), k.narrow(1, a, n), v.narrow(1, a, n)
            up = cpu_upcast(qs, n, self.cpu_upcast_min_rows)
            scores = matmul_f32(qs, ks.transpose(-1, -2), up) * self.scale
            p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(vs.dtype)
            outs.append(matmul_f32(p, vs, up))
            if need_saliency:
                ml, mp = segment_saliency(qs, ks, self.scale, self.saliency_chunk)
                logits.append(ml)
                probs.append(mp)
        out = torch.cat(outs, dim=1).transpose(0, 1).reshape(N, -1)
        if need_saliency:
            return self.proj(out), torch.cat(logits, dim=1), torch.cat(probs, dim=1)
        empty = torch.zeros(self.num_heads, 0, device=x.device)
        return self.proj(out), empty, empty


class QwenVisionBlock(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.norm1 = RMSNorm(cfg.hidden_size, 1e-6, **kw)
        self.norm2 = RMSNorm(cfg.hidden_size, 1e-6, **kw)
        self.attn = QwenVisionAttention(cfg, **kw)
        self.mlp = LlamaMLP(cfg, bias=True, **kw)  # gated SiLU with biases

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cu: List[int],
                need_saliency: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, ml, mp = self.attn(self.norm1(x), cos, sin, cu, need_saliency)
        x = x + h
        return x + self.mlp(self.norm2(x)), ml, mp


def vision_window_index(grid_thw: torch.Tensor, merge: int,
                        window_units: int) -> Tuple[torch.Tensor, List[int]]:
    """transformers' get_vision_window_index: (window_index [Np / merge^2] int64, the merge units
    in window order; cu_window_seqlens in patches, empty windows dropped)."""
    unit = merge * merge
    parts: List[torch.Tensor] = []
    cu: List[int] = [0]
    offset = 0
    for i in range(grid_thw.size(0)):
        t, h, w = int(grid_thw[i, 0]), int(grid_thw[i, 1]), int(grid_thw[i, 2])
        lh, lw = h // merge, w // merge
        pad_h = window_units - lh % window_units
        pad_w = window_units - lw % window_units
        nh, nw = (lh + pad_h) // window_units, (lw + pad_w) // window_units
        padded = torch.full([t, lh + pad_h, lw + pad_w], -100, dtype=torch.long,
                            device=grid_thw.device)
        padded[:, :lh, :lw] = torch.arange(t * lh * lw, device=grid_thw.device).reshape(t, lh, lw)
        padded = padded.reshape(t, nh, window_units, nw, window_units).permute(0, 1, 3, 2, 4)
        padded = padded.reshape(t, nh * nw, window_units * window_units)
        seqlens = (padded != -100).sum(dim=2).reshape(-1)
        flat = padded.reshape(-1)
        parts.append(flat[flat != -100] + offset)
        for j in range(seqlens.size(0)):
            n = int(seqlens[j])
            if n > 0:
                cu.append(cu[-1] + n * unit)
        offset += t * lh * lw
    return torch.cat(parts, dim=0), cu


def vision_positions(grid_thw: torch.Tensor, merge: int) -> torch.Tensor:
    """[Np, 2] int64 (row, column) of every patch, in the processor's order: merge blocks in
    raster order, the merge x merge patches of a block in raster order, repeated per slice."""
    out: List[torch.Tensor] = []
    for i in range(grid_thw.size(0)):
        t, h, w = int(grid_thw[i, 0]), int(grid_thw[i, 1]), int(grid_thw[i, 2])
        hp = torch.arange(h, device=grid_thw.device).unsqueeze(1).expand(h, w)
        wp = torch.arange(w, device=grid_thw.device).unsqueeze(0).expand(h, w)
        hp = hp.reshape(h // merge, merge, w // merge, merge).permute(0, 2, 1, 3).reshape(-1)
        wp = wp.reshape(h // merge, merge, w // merge, merge).permute(0, 2, 1, 3).reshape(-1)
        out.append(torch.stack([hp, wp], dim=-1).repeat(t, 1))
    return torch.cat(out, dim=0)


class QwenVisionTower(nn.Module):
    """patches [Np, 3*T*P*P] float32, grid_thw [n, 3] int64 -> the 7-tuple of the module
    docstring. Needs cfg: hidden_size, num_heads, num_layers (depth), intermediate_size,
    patch_size, temporal_patch_size, spatial_merge_size, window_size, fullatt_block_indexes,
    num_channels, rope_theta (vision RoPE base, 10000)."""

    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.patch_embed = QwenPatchEmbed(cfg, **kw)
        self.blocks = nn.ModuleList([QwenVisionBlock(cfg, **kw) for _ in range(cfg.num_layers)])
        self.ln_q = RMSNorm(cfg.hidden_size, 1e-6, **kw)
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.hidden_size // cfg.num_heads
        self.hidden_size = cfg.hidden_size
        self.merge = cfg.spatial_merge_size
        self.window_units = cfg.window_size // cfg.spatial_merge_size // cfg.patch_size
        self.rope_theta = float(getattr(cfg, "rope_theta", 10000.0))
        full = set(int(i) for i in cfg.fullatt_block_indexes)
        self.full_attention: List[bool] = [i in full for i in range(cfg.num_layers)]

    def rotary(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """positions [N, 2] -> cos, sin [N, head_dim] float32."""
        half = self.head_dim // 2
        exps = torch.arange(0, half, 2, dtype=torch.int64, device=positions.device).float()
        inv_freq = 1.0 / torch.pow(self.rope_theta, exps / half)
        freqs = positions.float().unsqueeze(-1) * inv_freq  # [N, 2, head_dim / 4]
        freqs = freqs.reshape(positions.shape[0], -1)  # height half, then width half
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos(), emb.sin()

    def to_window_order(self, x: torch.Tensor, window_index: torch.Tensor) -> torch.Tensor:
        unit = self.merge * self.merge
        return x.reshape(-1, unit, x.shape[-1])[window_index].reshape(-1, x.shape[-1])

    def forward(self, patches: torch.Tensor, grid_thw: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor, torch.Tensor]:
        if patches.dim() != 2 or grid_thw.dim() != 2 or grid_thw.size(1) != 3:
            raise ValueError("vision: expects patches [Np, D] and grid_thw [n, 3]")
        grid = grid_thw.to(device=patches.device, dtype=torch.long)
        counts = grid[:, 0] * grid[:, 1] * grid[:, 2]
        if int(counts.sum()) != patches.size(0):
            raise ValueError("vision: grid_thw does not match the number of patches")
        if bool(((grid[:, 1] % self.merge) != 0).any()) or bool(((grid[:, 2] % self.merge) != 0).any()):
            raise ValueError("vision: grid height and width must be multiples of the merge size")
        window_index, cu_window = vision_window_index(grid, self.merge, self.window_units)
        cu_full: List[int] = [0]
        for i in range(grid.size(0)):
            for _ in range(int(grid[i, 0])):
                cu_full.append(cu_full[-1] + int(grid[i, 1]) * int(grid[i, 2]))

        x = self.to_window_order(self.patch_embed(patches), window_index)
        cos, sin = self.rotary(vision_positions(grid, self.merge))
        cos = self.to_window_order(cos, window_index)
        sin = self.to_window_order(sin, window_index)
        n_layers = len(self.full_attention)
        mean_logits = torch.zeros(self.num_heads, 0, device=patches.device)
        mean_probs = mean_logits
        for i, block in enumerate(self.blocks):
            cu = cu_full if self.full_attention[i] else cu_window
            x, ml, mp = block(x, cos, sin, cu, i == n_layers - 1)
            if i == n_layers - 1:
                mean_logits, mean_probs = ml, mp
        unit = self.merge * self.merge
        reverse = torch.argsort(window_index)
        features = self.ln_q(x).reshape(-1, unit * self.hidden_size)[reverse]
        H = self.num_heads
        mean_logits = mean_logits.reshape(H, -1, unit).mean(dim=-1)[:, reverse]
        mean_probs = mean_probs.reshape(H, -1, unit).sum(dim=-1)[:, reverse]
        nm = features.shape[0]
        no_cls = torch.zeros(1, H, 0, device=patches.device)
        return (features.unsqueeze(0).contiguous(), no_cls, no_cls,
                mean_logits.unsqueeze(0).contiguous(), mean_probs.unsqueeze(0).contiguous(),
                torch.zeros(1, 0, device=patches.device, dtype=features.dtype),
                torch.zeros(1, nm, 0, device=patches.device))
