"""Eager PyTorch LLaVA-1.5 / LLaVA-NeXT modules, `torch.jit.script`-able under torch 1.13 and 2.x.

These are what `tools/export_llava.py` scripts into the bundle (see models/BUNDLE_FORMAT.md for the
exact interfaces) and what `tests/python/make_logit_refs.py` runs as the eager reference.

  VisionTower   CLIP ViT up to the feature layer; also returns that layer's saliency maps in
                float32: the CLS-query attention row (ERA's default) and the CLS-free "mean"
                readout (patch query rows averaged), each as logits and probabilities; and, for
                VisionZip, the CLS token's feature and the head-averaged keys of all tokens
  Projector     Linear -> exact (erf) GELU -> Linear; for LLaVA-NeXT it also carries the learned
                `image_newline` [D] parameter (not used by forward: the caller packs it)
  LlamaDecoder  LLaMA with the LAR attention and an in-place KV cache whose K~ rows carry every
                key's per-layer scaled log-bias. Per call, lar_path picks the "augmented key
                dimension" form (0) or the additive float mask built from the cached bias
                channel (1); forward_with_attention() also returns every layer's last-query
                attention logits. The attention core is picked at construction:
                  "math"  matmul + float32 softmax (works everywhere, the only one on torch 1.13)
                  "sdpa"  F.scaled_dot_product_attention(scale=...) (torch >= 2.1)
                The cores are separate classes, so TorchScript only ever compiles the chosen one.
  ExplicitLlamaDecoder  eager-only reference: no cache, plain [K, V] of width head_dim and
                `softmax(QK^T/sqrt(d) + s_l * log_b[key] + causal) V` recomputed from scratch
                (s_l: optional per-layer scales). This is the independent formula the C++ and
                exporter tests compare against.

Numerics follow HF transformers: RMSNorm variance in float32, normalised value cast back to the
model dtype before the weight multiply; RoPE inv_freq / cos / sin in float32, cast to the model
dtype; NeoX rotate_half layout; decoder logits returned as float32.
"""
import math
import re
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import era_ops  # noqa: F401  (defines era::gemv, which Linear calls)

ATTENTION_MODES = ("math", "sdpa", "explicit")


def torch_version():
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def sdpa_available():
    """F.scaled_dot_product_attention with the `scale=` argument arrived in torch 2.1."""
    return torch_version() >= (2, 1) and hasattr(F, "scaled_dot_product_attention")


def resolve_attention(mode):
    """'auto' -> 'sdpa' where available, else 'math'. Raises ValueError for an unusable mode."""
    if mode == "auto":
        return "sdpa" if sdpa_available() else "math"
    if mode not in ATTENTION_MODES:
        raise ValueError(f"unknown attention mode {mode!r} (auto, {', '.join(ATTENTION_MODES)})")
    if mode == "sdpa" and not sdpa_available():
        raise ValueError(f"attention 'sdpa' needs torch >= 2.1 (this is torch {torch.__version__})")
    return mode


# ================================================================================================
# float32 compute on CPUs without bfloat16 / float16 arithmetic
#
# Without AVX512-BF16 / AMX, LibTorch's CPU GEMM in bfloat16 runs several times below its float32
# rate (measured on an AVX2 EPYC: 21 vs 134 GFLOP/s), so a compute-bound matmul (many rows:
# the vision tower, prefill) is faster with its operands widened to float32 per call, weights
# included, while a one-row decode step stays memory-bound and reads the narrow weights as they
# are. The result is cast back to the model dtype, as the reduced-precision kernel rounds its
# float32 accumulator once at the output, so the numerics stay those of the bf16 model. The
# runtime sets `cpu_upcast_min_rows` (0 = off, the exported value) on every module that has it.

def cpu_upcast(x: torch.Tensor, rows: int, min_rows: int) -> bool:
    """True where a matmul with `rows` rows over x should run in float32 (see above)."""
    return min_rows > 0 and rows >= min_rows and x.dtype != torch.float32 and x.device.type == "cpu"


def matmul_f32(a: torch.Tensor, b: torch.Tensor, upcast: bool) -> torch.Tensor:
    """a @ b in a's dtype; with upcast, computed in float32 and rounded once to a's dtype."""
    if upcast:
        return torch.matmul(a.float(), b.float()).to(a.dtype)
    return torch.matmul(a, b)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state-dict keys) that widens compute-bound calls to
    float32 on CPUs where the runtime asks for it (cpu_upcast_min_rows > 0), and hands calls of
    at most `gemv_max_rows` rows (decode steps) to era::gemv, the C++ runtime's memory-bound
    kernel for bf16 / fp16 weights (era_ops.py; 0 = never, the exported value). Where the runtime
    replaced the weight by one packed for oneDNN (vision tower and projector on CPUs with native
    bf16 arithmetic: src/kernels/onednn_linear.h), or, on a LibTorch that cannot pack (1.13), left
    it plain to have its rows split between the threads, it sets `onednn_packed` and every call
    goes through era::onednn_linear."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.cpu_upcast_min_rows = 0
        self.gemv_max_rows = 0
        self.onednn_packed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.onednn_packed:
            return torch.ops.era.onednn_linear(x, self.weight, self.bias)
        rows = x.numel() // max(x.shape[-1], 1)
        if 0 < rows <= self.gemv_max_rows:
            return torch.ops.era.gemv(x, self.weight, self.bias)
        if cpu_upcast(x, rows, self.cpu_upcast_min_rows):
            # float32 sums rounded once to x's dtype; in C++ the weight is widened a slice at a
            # time into a buffer kept per thread (src/kernels/cpu_widened_linear.h)
            return torch.ops.era.widened_linear(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm (same parameters, same state-dict keys) that the runtime may tell to normalise
    a bf16 / fp16 input in float32 and round the result once (`float32_on_cpu`; False, the
    exported value, keeps LibTorch's kernel). That is what LibTorch 2.x's CPU kernel returns for
    a bf16 input (computed in float32, rounded at the end); LibTorch 1.13's bf16 kernel rounds
    between its steps and is several times slower than the float32 one (src/util/compat.h,
    kBf16LayerNormRoundsPerStep), so the C++ runtime sets it there."""

    def __init__(self, normalized_shape, eps=1e-5, device=None, dtype=None):
        super().__init__(normalized_shape, eps=eps, device=device, dtype=dtype)
        self.float32_on_cpu = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.float32_on_cpu and x.dtype != torch.float32 and x.device.type == "cpu":
            return F.layer_norm(x.float(), self.normalized_shape, self.weight.float(),
                                self.bias.float(), self.eps).to(x.dtype)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


# ================================================================================================
# vision tower (CLIP ViT)

def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(1.702 x), bit for bit HF CLIP's QuickGELU (the same three roundings), in one
    buffer: the product and the sigmoid write in place, where the plain expression allocated three
    [N, 4096] tensors per layer (1.4-1.7x slower on the CPU in bf16: 7-9 % of the tower's time).
    x itself is not modified."""
    t = x.mul(1.702)
    t.sigmoid_()
    return t.mul_(x)


class CLIPEmbeddings(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        C, P = cfg.hidden_size, cfg.patch_size
        self.patch_embedding = nn.Conv2d(cfg.num_channels, C, P, stride=P, bias=False, **kw)
        self.class_embedding = nn.Parameter(torch.randn(C, **kw))
        self.position_embedding = nn.Embedding(cfg.num_patches + 1, C, **kw)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch_embedding(pixel_values.to(self.patch_embedding.weight.dtype))
        x = x.flatten(2).transpose(1, 2)  # [B, N, C], raster order
        cls = self.class_embedding.view(1, 1, -1).expand(x.shape[0], 1, x.shape[2])
        x = torch.cat([cls, x], dim=1)
        return x + self.position_embedding.weight.unsqueeze(0)


class VisionMathCore(nn.Module):
    """softmax(Q K^T * scale) V over all tokens, the softmax in float32 (HF CLIP's eager
    numerics). `up`: the products in float32 (see cpu_upcast)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.per_head_kernel = False  # see VisionSdpaCore

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, up: bool) -> torch.Tensor:
        if up or self.per_head_kernel:  # the same roundings, one head at a time in C++
            return torch.ops.era.widened_attention(q, k, v, self.scale, 0, False)  # (cpu_widened_attention.h)
        scores = matmul_f32(q, k.transpose(-1, -2), up) * self.scale
        probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
        return matmul_f32(probs, v, up)


class VisionSdpaCore(nn.Module):
    """The same through F.scaled_dot_product_attention (torch >= 2.1): one fused kernel that never
    writes the [H, N, N] scores and probabilities (on CLIP-L/336, 16 x 577 x 577 per layer: the
    softmax alone was 23-31 % of the tower's CPU time). The saliency maps ERA reads are computed
    beside it in float32 (CLIPAttention), so they do not depend on the core."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        # Set by era's runtime where the CPU's bf16 arithmetic is AVX512-BF16 without AMX
        # (src/model/cpu_matmul.h): the core then runs era's per-head kernel,
        # era::widened_attention (HF's eager numerics, products in float32), which there beats
        # LibTorch's bf16 attention: CLIP-L's 16 x 577 x 64 layer
        # at 232-257 GFLOP/s against 115 (era_bench --machine, ATTN) and 142 for the fused
        # kernel inside the tower, on a 2-core Zen 5 VM. False as exported.
        self.per_head_kernel = False

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, up: bool) -> torch.Tensor:
        if up:
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                  scale=self.scale).to(q.dtype)
        if self.per_head_kernel:
            return torch.ops.era.widened_attention(q, k, v, self.scale, 0, False)
        return F.scaled_dot_product_attention(q, k, v, scale=self.scale)


def make_vision_core(attention: str, scale: float) -> nn.Module:
    """The vision tower's attention core for the decoder's attention mode: 'sdpa' -> the fused
    core; 'math' and 'explicit' (the decoder's eager reference) -> softmax(QK^T) V. Separate
    classes, so TorchScript compiles only the chosen one (torch 1.13 has no SDPA)."""
    if attention == "sdpa":
        resolve_attention("sdpa")
        return VisionSdpaCore(scale)
    if attention in ("math", "explicit"):
        return VisionMathCore(scale)
    raise ValueError(f"unknown attention mode {attention!r}")


class CLIPAttention(nn.Module):
    def __init__(self, cfg, attention="math", device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        C = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.head_dim = C // cfg.num_heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = Linear(C, C, **kw)
        self.k_proj = Linear(C, C, **kw)
        self.v_proj = Linear(C, C, **kw)
        self.out_proj = Linear(C, C, **kw)
        self.core = make_vision_core(attention, self.scale)
        self.cpu_upcast_min_rows = 0  # see Linear
        # Set by era's runtime where it packs the weights for oneDNN, or splits their rows
        # (src/kernels/onednn_linear.h):
        # q_proj then holds q, k and v's weights and biases concatenated, one [3C, C] product
        # (1.5-1.9x faster than three [C, C] ones at 577 rows on AMX), and k_proj / v_proj are
        # emptied. False as exported.
        self.qkv_fused = False
        # SigLIP (siglip_tower.py) has no CLS token: token 0 is a patch like the others
        self.has_cls = bool(getattr(cfg, "has_cls", True))

    def forward(self, x: torch.Tensor, need_saliency: bool
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (output, cls_logits [B,H,N+1] incl. the CLS column, mean_logits [B,H,N],
        mean_probs [B,H,N], mean_keys [B,N+1,head_dim]); the four saliency tensors are float32
        and empty unless need_saliency. mean_keys: the keys k_proj(x) averaged over the heads,
        CLS included (VisionZip's token-similarity metric). Without a CLS token (SigLIP):
        cls_logits is [B,H,0] and the mean readout averages all N query rows over all N keys."""
        B, N, C = x.shape
        if self.qkv_fused:
            q, k, v = self.q_proj(x).split(C, dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        up = cpu_upcast(x, N, self.cpu_upcast_min_rows)
        out = self.core(q, k, v, up).transpose(1, 2).reshape(B, N, C)
        if need_saliency and not self.has_cls:
            full = torch.matmul(q.float(), k.float().transpose(-1, -2)) * self.scale  # [B,H,N,N]
            cls_logits = torch.zeros(B, self.num_heads, 0, device=x.device)
            mean_logits = full.mean(dim=2)
            mean_probs = torch.softmax(full, dim=-1).mean(dim=2)
            mean_keys = k.float().mean(dim=1)
        elif need_saliency:
            # The saliency rows, recomputed in float32 from the model-dtype q/k (in fp16 the
            # in-kernel scores are too coarse to rank tokens). CLS row: [B, H, N] incl. the CLS
            # column.
            kf = k.float().transpose(-1, -2)
            cls_logits = torch.matmul(q[:, :, 0:1].float(), kf).squeeze(2) * self.scale
            # CLS-free "mean" readout: every patch query row (CLS query excluded), the softmax
            # over all keys (CLS included), then the CLS key column dropped and the rows averaged.
            full = torch.matmul(q.float(), kf) * self.scale  # [B, H, N+1, N+1]
            mean_logits = full[:, :, 1:, 1:].mean(dim=2)
            mean_probs = torch.softmax(full, dim=-1)[:, :, 1:, 1:].mean(dim=2)
            mean_keys = k.float().mean(dim=1)  # [B, N+1, head_dim]
        else:
            cls_logits = torch.zeros(0, device=x.device)
            mean_logits = cls_logits
            mean_probs = cls_logits
            mean_keys = cls_logits
        return self.out_proj(out), cls_logits, mean_logits, mean_probs, mean_keys


class CLIPMLP(nn.Module):
    def __init__(self, cfg, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.fc1 = Linear(cfg.hidden_size, cfg.intermediate_size, **kw)
        self.fc2 = Linear(cfg.intermediate_size, cfg.hidden_size, **kw)
        # CLIP: quick_gelu; SigLIP: gelu_pytorch_tanh (the tanh approximation)
        self.tanh_gelu = getattr(cfg, "hidden_act", "quick_gelu") == "gelu_pytorch_tanh"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tanh_gelu:
            return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))
        return self.fc2(quick_gelu(self.fc1(x)))


class CLIPEncoderLayer(nn.Module):
    def __init__(self, cfg, attention="math", device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.layer_norm1 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, **kw)
        self.self_attn = CLIPAttention(cfg, attention=attention, **kw)
        self.layer_norm2 = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, **kw)
        self.mlp = CLIPMLP(cfg, **kw)

    def forward(self, x: torch.Tensor, need_saliency: bool
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        h, cls_logits, mean_logits, mean_probs, mean_keys = self.self_attn(self.layer_norm1(x),
                                                                            need_saliency)
        x = x + h
        x = x + self.mlp(self.layer_norm2(x))
        return x, cls_logits, mean_logits, mean_probs, mean_keys


class CLIPEncoder(nn.Module):
    """Only the first `layers_run` layers exist: the ones after the deepest feature layer never
    run. Returns (the selected hidden states concatenated along the hidden dim in the config's
    order, the deepest layer's output, its saliency maps). HF's hidden_states[k] is the output of
    layer k-1, so layer i's output is selected when i + 1 is among `feature_indices`."""

    def __init__(self, cfg, attention="math", device=None, dtype=None):
        super().__init__()
        self.layers = nn.ModuleList(
            [CLIPEncoderLayer(cfg, attention=attention, device=device, dtype=dtype)
             for _ in range(cfg.layers_run)])
        self.num_layers = cfg.layers_run
        self.feature_indices: List[int] = list(getattr(cfg, "feature_indices", [cfg.layers_run]))

    def forward(self, x: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor]:
        cls_logits = torch.zeros(0, device=x.device)
        mean_logits, mean_probs, mean_keys = cls_logits, cls_logits, cls_logits
        states: List[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            x, c, ml, mp, mk = layer(x, i == self.num_layers - 1)
            states.append(x)
            if i == self.num_layers - 1:
                cls_logits, mean_logits, mean_probs, mean_keys = c, ml, mp, mk
        selected = torch.cat([states[k - 1] for k in self.feature_indices], dim=-1)
        return selected, x, cls_logits, mean_logits, mean_probs, mean_keys


class VisionTower(nn.Module):
    """pixels [B,3,S,S] float32 -> (features [B,N,C] model dtype, CLS logits [B,H,N] f32,
    CLS probs [B,H,N] f32, mean logits [B,H,N] f32, mean probs [B,H,N] f32, CLS feature [B,C]
    model dtype, mean keys [B,N+1,head_dim] f32). Features are HF
    `hidden_states[feature_layer]` (a list of layers: each, concatenated along the hidden dim)
    with CLS dropped, or kept ([B,N+1,...]) under select_strategy "full"; the saliency maps and
    the CLS feature come from the deepest selected layer. CLS: that layer's CLS query row; the
    probabilities are the softmax over the whole row (CLS column included), then dropped. Mean
    (CLS-free readout): the same layer's attention averaged over the N patch query rows (CLS query
    row excluded), CLS key column dropped; for the probabilities each row's softmax runs over all
    N+1 keys before the CLS column is dropped, then the rows are averaged."""

    def __init__(self, cfg, attention="math", device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.embeddings = CLIPEmbeddings(cfg, **kw)
        self.pre_layrnorm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, **kw)
        self.encoder = CLIPEncoder(cfg, attention=attention, **kw)
        self.first_token = 0 if getattr(cfg, "select_strategy", "default") == "full" else 1

    def forward(self, pixel_values: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           torch.Tensor, torch.Tensor]:
        x = self.pre_layrnorm(self.embeddings(pixel_values))
        features, x, cls_logits, mean_logits, mean_probs, mean_keys = self.encoder(x)
        cls_probs = torch.softmax(cls_logits, dim=-1)
        return (features[:, self.first_token:].contiguous(), cls_logits[:, :, 1:].contiguous(),
                cls_probs[:, :, 1:].contiguous(), mean_logits.contiguous(),
                mean_probs.contiguous(), x[:, 0].contiguous(), mean_keys.contiguous())


# ================================================================================================
# projector

class Projector(nn.Module):
    """features [B,N,C] -> [B,N,D]. With image_newline=True (LLaVA-NeXT) the module also owns a
    registered parameter `image_newline` [D] (model dtype): the token LLaVA-NeXT appends to every
    row of the unpadded tile grid. forward() never touches it; it rides along so a bundle's
    projector.pt carries it (TorchScript: `attr("image_newline")` / named_parameters)."""

    def __init__(self, in_features, out_features, bias=True, image_newline=False, device=None,
                 dtype=None, hidden_features=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        # hidden_features: the width between the two layers (Qwen2.5-VL's merger MLP: 4C -> 4C ->
        # D); default out_features (LLaVA: C -> D -> D)
        hidden = out_features if hidden_features is None else hidden_features
        self.linear_1 = Linear(in_features, hidden, bias=bias, **kw)
        self.linear_2 = Linear(hidden, out_features, bias=bias, **kw)
        if image_newline:
            self.image_newline = nn.Parameter(torch.zeros(out_features, **kw), requires_grad=False)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.gelu(self.linear_1(features)))  # exact erf GELU, as LLaVA's "gelu"


# ================================================================================================
# LLaMA decoder with LAR attention

class RMSNorm(nn.Module):
    def __init__(self, dim, eps, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float,
                 dtype: torch.dtype,
                 mrope_section: Optional[List[int]] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """positions [B,T] int64 -> cos, sin [B,T,head_dim] in `dtype`, computed in float32 (HF).
    inv_freq is recomputed here rather than kept as a buffer so `module.to(dtype)` can never
    round it.

    Multimodal RoPE (Qwen2.5-VL, mrope_section e.g. [16, 24, 24], summing to head_dim / 2):
    positions may be [B,T,3] (temporal, height, width); each axis gives its own frequencies and
    the head_dim / 2 of them are split by mrope_section, chunk i taken from axis i % 3 (HF's
    Qwen2_5_VLRotaryEmbedding). [B,T] positions mean all three axes equal, which is ordinary
    RoPE. Without a section, [B,T,3] positions use axis 0."""
    exps = torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float()
    inv_freq = 1.0 / torch.pow(theta, exps / head_dim)
    if positions.dim() == 3:
        axes = positions.float().unsqueeze(-1) * inv_freq  # [B, T, 3, head_dim / 2]
        if mrope_section is not None and len(mrope_section) > 0:
            chunks: List[torch.Tensor] = []
            start = 0
            for i, n in enumerate(mrope_section):
                chunks.append(axes.select(2, i % 3).narrow(-1, start, n))
                start += n
            freqs = torch.cat(chunks, dim=-1)
        else:
            freqs = axes.select(2, 0)
    else:
        freqs = positions.float().unsqueeze(-1) * inv_freq  # outer product, exact like HF's K=1 matmul
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def hidden_keys(tq: int, tk: int, offset: int, device: torch.device) -> torch.Tensor:
    """[tq, tk] bool, True where key j is in the future of query t (j > offset + t)."""
    q_pos = torch.arange(tq, device=device).unsqueeze(1) + offset
    k_pos = torch.arange(tk, device=device).unsqueeze(0)
    return k_pos > q_pos


# ---- LAR augmentation: Q~ = [Q, 1, 0..], K~ = [K, sqrt(d) log_b, 0..], V~ = [V, 0..] -------------

def augment_query(q: torch.Tensor, width: int) -> torch.Tensor:
    q = torch.cat([q, torch.ones_like(q[..., :1])], dim=-1)
    return F.pad(q, [0, width - q.shape[-1]])


def augment_key(k: torch.Tensor, key_log_bias: torch.Tensor, sqrt_d: float,
                width: int) -> torch.Tensor:
    """k [B,Hk,T,d], key_log_bias [B,T] -> [B,Hk,T,width]."""
    B, Hk, T, _ = k.shape
    col = (key_log_bias.float() * sqrt_d).to(k.dtype).view(B, 1, T, 1).expand(B, Hk, T, 1)
    k = torch.cat([k, col], dim=-1)
    return F.pad(k, [0, width - k.shape[-1]])


def augment_value(v: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(v, [0, width - v.shape[-1]])


def additive_mask(key_bias: torch.Tensor, tq: int, tk: int, causal_offset: int) -> torch.Tensor:
    """LAR's additive-mask form: key_bias [B,Tk] float32 (log_b per key, already scaled) ->
    float32 mask [B,1,1,Tk] (a single query that sees every key) or [B,1,Tq,Tk] (causal -inf on
    the hidden keys, + the bias on every key), broadcast over heads (and queries)."""
    mask = key_bias.float()[:, None, None, :]
    if tq > 1 or causal_offset + tq < tk:
        causal = torch.zeros(tq, tk, device=key_bias.device).masked_fill(
            hidden_keys(tq, tk, causal_offset, key_bias.device), float("-inf"))
        mask = mask + causal
    return mask


class MathAttention(nn.Module):
    """softmax(Q K^T * scale + causal) V with the softmax in float32 (HF "eager" numerics)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.cpu_upcast_min_rows = 0  # see Linear
        self.decode_kernel = False  # see SdpaAttention

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                causal_offset: int) -> torch.Tensor:
        tq, tk = q.shape[2], k.shape[2]
        if self.decode_kernel and tq == 1 and causal_offset + 1 >= tk:
            return torch.ops.era.widened_attention(q, k, v, self.scale, causal_offset, False)
        up = cpu_upcast(q, tq, self.cpu_upcast_min_rows)
        if up:  # the same roundings, one head at a time in C++ (src/kernels/cpu_widened_attention.h)
            return torch.ops.era.widened_attention(q, k, v, self.scale, causal_offset, True)
        scores = (matmul_f32(q, k.transpose(-1, -2), up) * self.scale).float()
        if tq > 1 or causal_offset + tq < tk:  # a single last query sees every key: no mask
            scores = scores.masked_fill(hidden_keys(tq, tk, causal_offset, q.device),
                                        float("-inf"))
        return matmul_f32(torch.softmax(scores, dim=-1).to(v.dtype), v, up)

    def forward_bias(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     key_bias: torch.Tensor, causal_offset: int) -> torch.Tensor:
        """LAR's additive-mask path: softmax(Q K^T * scale + (causal + key_bias)) V, plain
        width-d q/k/v, key_bias [B,Tk] float32 added in float32 after the scale."""
        tq, tk = q.shape[2], k.shape[2]
        up = cpu_upcast(q, tq, self.cpu_upcast_min_rows)
        scores = (matmul_f32(q, k.transpose(-1, -2), up) * self.scale).float()
        scores = scores + additive_mask(key_bias, tq, tk, causal_offset)
        return matmul_f32(torch.softmax(scores, dim=-1).to(v.dtype), v, up)


class SdpaAttention(nn.Module):
    """The same through F.scaled_dot_product_attention (torch >= 2.1), scale passed explicitly
    (the augmented width must not change it). No mask in the two common cases, so the fused
    kernels stay eligible: full prefill (is_causal) and one-token decode (sees everything)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.cpu_upcast_min_rows = 0  # see Linear
        # Set by era's runtime on a CPU whose bf16 products run in oneDNN's bf16 kernels
        # (src/model/cpu_matmul.h): a one-token decode step then takes HF's eager composition
        # (MathAttention's) instead of LibTorch's fused CPU kernel, which is slow for one query:
        # 32 heads of 136, bf16, 2 threads on a Zen 5 VM: 0.70 / 2.8 / 12.2 ms at 250 / 1000 /
        # 4000 keys fused, 0.19 / 0.60 / 3.8 eager. Where bf16 products are LibTorch's own
        # kernels the eager form is the slower one (0.81 / 3.9 / 15.3 ms): False as exported.
        self.eager_decode = False
        # Set by era's runtime for a bf16 model on a CPU with AVX2 (src/model/cpu_matmul.h): a
        # one-token decode step that sees every key runs era::widened_attention, which reads the
        # cache slices where they lie (HF's eager roundings, float32 products). Both compositions
        # above copied each head's K and V slice inside bmm: 0.64 ms a layer at 250 keys on the
        # Zen 5 VM. Before eager_decode, which bundles exported before it keep.
        self.decode_kernel = False

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                causal_offset: int) -> torch.Tensor:
        if self.decode_kernel and q.shape[2] == 1 and causal_offset + 1 >= k.shape[2]:
            return torch.ops.era.widened_attention(q, k, v, self.scale, causal_offset, False)
        if cpu_upcast(q, q.shape[2], self.cpu_upcast_min_rows):
            return self.attend(q.float(), k.float(), v.float(), causal_offset).to(q.dtype)
        if self.eager_decode and q.shape[2] == 1 and causal_offset + 1 >= k.shape[2]:
            scores = (torch.matmul(q, k.transpose(-1, -2)) * self.scale).float()
            return torch.matmul(torch.softmax(scores, dim=-1).to(v.dtype), v)
        return self.attend(q, k, v, causal_offset)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               causal_offset: int) -> torch.Tensor:
        tq, tk = q.shape[2], k.shape[2]
        if tq == 1 and causal_offset + 1 >= tk:
            return F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        if causal_offset == 0 and tq == tk:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        allowed = torch.logical_not(hidden_keys(tq, tk, causal_offset, q.device))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=self.scale)

    def forward_bias(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     key_bias: torch.Tensor, causal_offset: int) -> torch.Tensor:
        """The additive-mask path: the float mask (causal + key_bias, in the query dtype, as
        SDPA wants it) as attn_mask. Flash attention does not take a float mask; the
        memory-efficient and math backends do."""
        mask = additive_mask(key_bias, q.shape[2], k.shape[2], causal_offset)
        if cpu_upcast(q, q.shape[2], self.cpu_upcast_min_rows):
            return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask,
                                                  scale=self.scale).to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype), scale=self.scale)


def make_attention_core(mode, scale):
    if mode in ("math", "explicit"):  # the explicit decoder keeps a math core for attend()
        return MathAttention(scale)
    if mode == "sdpa":
        resolve_attention("sdpa")
        return SdpaAttention(scale)
    raise ValueError(f"unknown attention mode {mode!r}")


def explicit_scores(q, k, key_log_bias, causal_offset=0):
    """The reference logits, eager only, float32: QK^T/sqrt(d) + log_b[key], -inf on the hidden
    keys. q [B,H,Tq,d], k [B,H,Tk,d], key_log_bias [B,Tk] -> [B,H,Tq,Tk]."""
    d = q.shape[-1]
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(d)
    scores = scores + key_log_bias.float()[:, None, None, :]
    return scores.masked_fill(hidden_keys(q.shape[2], k.shape[2], causal_offset, q.device),
                              float("-inf"))


def explicit_attention(q, k, v, key_log_bias, causal_offset=0):
    """The reference formula, eager only, in float32: softmax(QK^T/sqrt(d) + log_b + causal) V.
    q [B,H,Tq,d], k/v [B,H,Tk,d], key_log_bias [B,Tk]; query t sees keys <= causal_offset + t."""
    scores = explicit_scores(q, k, key_log_bias, causal_offset)
    return torch.matmul(torch.softmax(scores, dim=-1), v.float()).to(q.dtype)


def layer_log_bias(key_log_bias, layer_scale, i):
    """Eager-only: layer i's log-bias for the explicit reference (None = scale 1 everywhere)."""
    if layer_scale is None:
        return key_log_bias
    return key_log_bias.float() * float(layer_scale[i])


LAR_AUGMENTED, LAR_MASK = 0, 1  # the decoder's lar_path argument


class LlamaAttention(nn.Module):
    def __init__(self, cfg, core, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        D, H, Hkv, hd = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv_bias = bool(getattr(cfg, "qkv_bias", False))  # Qwen2: biased q/k/v, unbiased o
        self.q_proj = Linear(D, H * hd, bias=qkv_bias, **kw)
        self.k_proj = Linear(D, Hkv * hd, bias=qkv_bias, **kw)
        self.v_proj = Linear(D, Hkv * hd, bias=qkv_bias, **kw)
        self.o_proj = Linear(H * hd, D, bias=False, **kw)
        self.num_heads, self.num_kv_heads, self.head_dim = H, Hkv, hd
        self.n_rep = H // Hkv
        self.cache_head_dim = cfg.cache_head_dim
        self.sqrt_d = math.sqrt(hd)
        self.scale = 1.0 / math.sqrt(hd)
        self.core = core

    def project(self, x: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B,T,D] -> q [B,H,T,d], k, v [B,Hkv,T,d], RoPE applied to q and k."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * c + rotate_half(q) * s
        k = k * c + rotate_half(k) * s
        return q, k, v

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache_pos: int,
                key_log_bias: torch.Tensor, bias_scale: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, lar_path: int,
                need_attn: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """k_cache / v_cache: this layer's [B, Hkv, S_max, cache_head_dim], updated in place.
        bias_scale: this layer's LAR multiplier (0-dim). Returns (output, attention logits of the
        last query [B,H,Tk] float32 when need_attn, else an empty tensor)."""
        B, T, _ = x.shape
        d = self.head_dim
        q, k, v = self.project(x, cos, sin)
        # K~ = [K, sqrt(d) * scale_l * log_b, 0..]: the per-layer bias lives in the cache
        bias = key_log_bias.float() * bias_scale.float()
        k_cache.narrow(2, cache_pos, T).copy_(
            augment_key(k, bias, self.sqrt_d, self.cache_head_dim))
        v_cache.narrow(2, cache_pos, T).copy_(augment_value(v, self.cache_head_dim))
        tk = cache_pos + T
        keys = k_cache.narrow(2, 0, tk)
        values = v_cache.narrow(2, 0, tk)
        if lar_path == 0:  # augmented Q~/K~/V~
            query = augment_query(q, self.cache_head_dim)
            key_bias = torch.zeros(0, device=x.device)
        else:  # additive mask: plain width-d Q/K/V, the bias channel of the cache as a mask
            query = q
            key_bias = keys.select(1, 0).select(-1, d).float() / self.sqrt_d  # [B, Tk]
            keys = keys.narrow(-1, 0, d)
            values = values.narrow(-1, 0, d)
        if self.n_rep > 1:  # GQA: kv head j serves query heads j*n_rep .. (j+1)*n_rep-1 (HF)
            keys = keys.repeat_interleave(self.n_rep, dim=1)
            values = values.repeat_interleave(self.n_rep, dim=1)
        if lar_path == 0:
            out = self.core(query, keys, values, cache_pos)
        else:
            out = self.core.forward_bias(query, keys, values, key_bias, cache_pos)
        if need_attn:
            # The last query sees every key: its row is exactly what the softmax gets.
            attn = (torch.matmul(query.narrow(2, T - 1, 1), keys.transpose(-1, -2))
                    * self.scale).float().squeeze(2)
            if lar_path != 0:
                attn = attn + key_bias.unsqueeze(1)
        else:
            attn = torch.zeros(0, device=x.device)
        out = out.narrow(-1, 0, d).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(out), attn

    def forward_explicit(self, x, cos, sin, key_log_bias):
        """Eager-only reference: no cache, plain width-d keys, the explicit formula.
        Returns (output, the last query's logits [B,H,T] float32)."""
        B, T, _ = x.shape
        q, k, v = self.project(x, cos, sin)
        k = k.repeat_interleave(self.n_rep, dim=1)
        v = v.repeat_interleave(self.n_rep, dim=1)
        out = explicit_attention(q, k, v, key_log_bias, 0)
        last = explicit_scores(q[:, :, -1:], k, key_log_bias, T - 1)[:, :, 0]
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1)), last


class LlamaMLP(nn.Module):
    """The gated SiLU MLP (LLaMA / Qwen2 decoders: no biases; Qwen2.5-VL's vision blocks: biased)."""

    def __init__(self, cfg, device=None, dtype=None, bias=False):
        super().__init__()
        kw = {"device": device, "dtype": dtype, "bias": bias}
        self.gate_proj = Linear(cfg.hidden_size, cfg.intermediate_size, **kw)
        self.up_proj = Linear(cfg.hidden_size, cfg.intermediate_size, **kw)
        self.down_proj = Linear(cfg.intermediate_size, cfg.hidden_size, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg, core, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.self_attn = LlamaAttention(cfg, core, **kw)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.mlp = LlamaMLP(cfg, **kw)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache_pos: int,
                key_log_bias: torch.Tensor, bias_scale: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, lar_path: int,
                need_attn: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        h, attn = self.self_attn(self.input_layernorm(x), cos, sin, cache_pos, key_log_bias,
                                 bias_scale, k_cache, v_cache, lar_path, need_attn)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), attn

    def forward_explicit(self, x, cos, sin, key_log_bias):
        h, last = self.self_attn.forward_explicit(self.input_layernorm(x), cos, sin, key_log_bias)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), last


class LlamaDecoder(nn.Module):
    """The bundle's decoder.pt: embed(), forward() with the in-place LAR KV cache (augmented or
    additive-mask path, per-layer bias scales), forward_with_attention(), attend(), and the
    pieces in-decoder pruning drives one by one: run_range(), final_norm(), logits()."""

    # declared on the class: TorchScript 1.13 cannot infer the type of an empty list attribute
    mrope_section: List[int]

    def __init__(self, cfg, attention="math", device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.head_dim = cfg.head_dim
        self.cache_head_dim = cfg.cache_head_dim
        self.num_layers = cfg.num_layers
        self.rope_theta = float(cfg.rope_theta)
        # Qwen2.5-VL's multimodal RoPE split ([] = ordinary RoPE); positions [B,T] or [B,T,3]
        self.mrope_section: List[int] = [int(n) for n in (getattr(cfg, "mrope_section", None) or [])]
        self.sqrt_d = math.sqrt(cfg.head_dim)
        scale = 1.0 / math.sqrt(cfg.head_dim)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, **kw)
        self.layers = nn.ModuleList([
            LlamaDecoderLayer(cfg, make_attention_core(attention, scale), **kw)
            for _ in range(cfg.num_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, **kw)
        self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size, bias=False, **kw)
        self.core = make_attention_core(attention, scale)

    @torch.jit.export
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(ids)

    def check_lar(self, layer_bias_scale: torch.Tensor, lar_path: int):
        if lar_path != 0 and lar_path != 1:
            raise ValueError("decoder: lar_path must be 0 (augmented) or 1 (additive mask)")
        if layer_bias_scale.dim() != 1 or layer_bias_scale.size(0) != self.num_layers:
            raise ValueError("decoder: layer_bias_scale must be a 1-d tensor with one scale per "
                             "decoder layer")

    @torch.jit.export
    def run_range(self, x: torch.Tensor, positions: torch.Tensor, cache_pos: int,
                  key_log_bias: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  layer_bias_scale: torch.Tensor, lar_path: int, begin: int, end: int,
                  need_attn: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """Layers [begin, end) only: hidden states [B,T,D] in -> out, K/V written into
        k_cache[i] / v_cache[i] at slot cache_pos of each layer i in the range. With need_attn,
        also those layers' last-query attention logits [end-begin,B,H,cache_pos+T]. In-decoder
        pruning (FastV, DART) runs the layers below and from the pruning layer separately."""
        self.check_lar(layer_bias_scale, lar_path)
        if begin < 0 or end > self.num_layers or begin > end:
            raise ValueError("decoder: run_range needs 0 <= begin <= end <= num_layers")
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta, x.dtype,
                                self.mrope_section)
        scales = layer_bias_scale.float()
        attns: List[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            if i >= begin and i < end:
                x, a = layer(x, cos, sin, cache_pos, key_log_bias, scales[i], k_cache[i],
                             v_cache[i], lar_path, need_attn)
                if need_attn:
                    attns.append(a)
        if need_attn and len(attns) > 0:
            return x, torch.stack(attns, dim=0)
        return x, torch.zeros(0, device=x.device)

    @torch.jit.export
    def final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The final RMSNorm alone [B,T,D] -> [B,T,D] (model dtype): DART's similarity space."""
        return self.norm(x)

    @torch.jit.export
    def logits(self, x: torch.Tensor, last_only: bool) -> torch.Tensor:
        """Final RMSNorm + lm_head of the last layer's hidden states -> float32 [B,T,V]
        ([B,1,V] when last_only)."""
        if last_only:
            x = x[:, -1:]
        return self.lm_head(self.norm(x)).float()

    def run_layers(self, embeds: torch.Tensor, positions: torch.Tensor, cache_pos: int,
                   key_log_bias: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   layer_bias_scale: torch.Tensor, lar_path: int, last_only: bool,
                   need_attn: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        x, attn = self.run_range(embeds, positions, cache_pos, key_log_bias, k_cache, v_cache,
                                 layer_bias_scale, lar_path, 0, self.num_layers, need_attn)
        return self.logits(x, last_only), attn

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, cache_pos: int,
                key_log_bias: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                layer_bias_scale: torch.Tensor, lar_path: int, last_only: bool) -> torch.Tensor:
        logits, _ = self.run_layers(embeds, positions, cache_pos, key_log_bias, k_cache, v_cache,
                                    layer_bias_scale, lar_path, last_only, False)
        return logits

    @torch.jit.export
    def forward_with_attention(self, embeds: torch.Tensor, positions: torch.Tensor,
                               cache_pos: int, key_log_bias: torch.Tensor, k_cache: torch.Tensor,
                               v_cache: torch.Tensor, layer_bias_scale: torch.Tensor,
                               lar_path: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """forward(..., last_only=True) plus every layer's last-query attention logits
        [L,B,H,cache_pos+T] float32 (scaled, LAR bias included: what that softmax sees)."""
        return self.run_layers(embeds, positions, cache_pos, key_log_bias, k_cache, v_cache,
                               layer_bias_scale, lar_path, True, True)

    @torch.jit.export
    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               key_log_bias: torch.Tensor, causal_offset: int) -> torch.Tensor:
        """The LAR attention alone: q [B,H,Tq,d], k/v [B,H,Tk,d] (d = head_dim), bias [B,Tk]."""
        out = self.core(augment_query(q, self.cache_head_dim),
                        augment_key(k, key_log_bias, self.sqrt_d, self.cache_head_dim),
                        augment_value(v, self.cache_head_dim), causal_offset)
        return out.narrow(-1, 0, self.head_dim)

    def forward_explicit(self, embeds, positions, key_log_bias, layer_scale=None,
                         return_attn=False):
        """Eager-only reference: full recompute without a cache -> float32 logits [B,T,V].
        layer_scale: per-layer multipliers of key_log_bias (None = 1 everywhere). With
        return_attn, also every layer's last-query logits [L,B,H,T] (float32, bias included)."""
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta, embeds.dtype,
                                self.mrope_section)
        x = embeds
        attns = []
        for i, layer in enumerate(self.layers):
            x, last = layer.forward_explicit(x, cos, sin,
                                             layer_log_bias(key_log_bias, layer_scale, i))
            attns.append(last)
        logits = self.lm_head(self.norm(x)).float()
        return (logits, torch.stack(attns, 0)) if return_attn else logits

    def forward_explicit_masked(self, embeds, positions, key_log_bias, first_masked_layer,
                                key_kept):
        """Eager-only reference of in-decoder pruning (FastV / DART), the official code's "mask
        implementation": nothing is removed and positions stay the original ones; from layer
        `first_masked_layer` on, every key with key_kept False is hidden from every query.
        key_kept: bool [B,T]. Returns float32 logits [B,T,V] (rows of masked tokens are
        meaningless)."""
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta, embeds.dtype,
                                self.mrope_section)
        masked = key_log_bias.float().masked_fill(~key_kept, float("-inf"))
        x = embeds
        for i, layer in enumerate(self.layers):
            x, _ = layer.forward_explicit(x, cos, sin,
                                          key_log_bias if i < first_masked_layer else masked)
        return self.lm_head(self.norm(x)).float()

    def explicit_signals(self, embeds, positions, key_log_bias, layer):
        """Eager-only: what in-decoder pruning reads at decoder layer `layer` (no cache):
        (output hidden states [B,T,D], post-RoPE keys with GQA heads repeated [B,H,T,d],
        the last query's attention logits [B,H,T] float32, LAR bias included)."""
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta, embeds.dtype,
                                self.mrope_section)
        x = embeds
        for i in range(layer):
            x, _ = self.layers[i].forward_explicit(x, cos, sin, key_log_bias)
        attn = self.layers[layer].self_attn
        _, k, _ = attn.project(self.layers[layer].input_layernorm(x), cos, sin)
        k = k.repeat_interleave(attn.n_rep, dim=1)
        out, last = self.layers[layer].forward_explicit(x, cos, sin, key_log_bias)
        return out, k, last

    def new_cache(self, batch, max_len, dtype=None, device=None):
        """Zero (k_cache, v_cache) [L,B,Hkv,max_len,cache_head_dim] as the C++ caller allocates."""
        attn = self.layers[0].self_attn
        w = self.embed_tokens.weight
        shape = (len(self.layers), batch, attn.num_kv_heads, max_len, self.cache_head_dim)
        kw = {"dtype": dtype or w.dtype, "device": device or w.device}
        return torch.zeros(shape, **kw), torch.zeros(shape, **kw)

    def unit_scales(self):
        """layer_bias_scale of 1 in every layer (the default: LAR everywhere)."""
        return torch.ones(self.num_layers)


class ExplicitLlamaDecoder(LlamaDecoder):
    """Eager-only reference decoder: forward(embeds, positions, key_log_bias, layer_scale=None)
    -> logits, full recompute with the explicit formula. Never exported."""

    def forward(self, embeds, positions, key_log_bias, layer_scale=None):  # noqa: D102
        return self.forward_explicit(embeds, positions, key_log_bias, layer_scale)


# ================================================================================================
# builders

def assign_weights(module, state, dtype, what):
    """Replace every parameter of a (meta-device) module by the checkpoint tensor, cast to dtype.
    Assigning (instead of load_state_dict's copy) keeps one copy of multi-GB weights in memory."""
    params = dict(module.named_parameters())
    missing = sorted(set(params) - set(state))
    unexpected = sorted(set(state) - set(params))
    if missing or unexpected:
        raise ValueError(f"{what}: state dict mismatch (missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]})")
    for name, t in state.items():
        if tuple(t.shape) != tuple(params[name].shape):
            raise ValueError(f"{what}: {name} has shape {list(t.shape)}, module expects "
                             f"{list(params[name].shape)}")
        owner_name, _, pname = name.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        setattr(owner, pname, nn.Parameter(t.detach().to(dtype).contiguous(), requires_grad=False))
    return module.eval()


_assign = assign_weights


def build_vision(ckpt, dtype=torch.float32, attention="math"):
    """The checkpoint's vision tower, built by its family (ckpt.config.family, see
    era_tools.families). attention: the CLIP / SigLIP layers' core ('sdpa', or 'math'; the
    decoder's 'explicit' reads as 'math'). Qwen2.5-VL's tower keeps its own (windowed)
    attention."""
    attention = resolve_attention(attention)
    return ckpt.config.family.build_vision(ckpt, dtype, attention)


def build_projector(ckpt, dtype=torch.float32):
    """The checkpoint's projector, built by its family (ckpt.config.family)."""
    return ckpt.config.family.build_projector(ckpt, dtype)


def build_llava_projector(ckpt, dtype, image_newline=False, hidden_features=None):
    """Projector (two linears, GELU between) from the feature width to the text width, with the
    family's `image_newline` parameter and width between the layers."""
    cfg = ckpt.config
    width = getattr(cfg.vision, "feature_width", cfg.vision.hidden_size)
    module = Projector(width, cfg.text.hidden_size, bias=cfg.projector_bias,
                       image_newline=image_newline, device="meta", dtype=dtype,
                       hidden_features=hidden_features)
    return assign_weights(module, ckpt.projector, dtype, "projector")


def build_decoder(ckpt, dtype=torch.float32, attention="math"):
    """attention: 'math' / 'sdpa' (exportable LlamaDecoder) or 'explicit' (ExplicitLlamaDecoder)."""
    attention = resolve_attention(attention)
    cls = ExplicitLlamaDecoder if attention == "explicit" else LlamaDecoder
    module = cls(ckpt.config.text, attention=attention, device="meta", dtype=dtype)
    return assign_weights(module, ckpt.text, dtype, "decoder")
