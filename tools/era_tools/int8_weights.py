"""int8 weights for an era bundle (export_llava.py --int8 decoder|all, --int8-scheme).

Every era Linear of the chosen modules stores its weight as int8 with one float32 scale per output
channel (symmetric: scale = max |w| / 127 over the row). Two schemes run them:

- "weight-only" (Int8Linear, the default): the int8 weight and its scales are plain tensors, and
  the C++ runtime's era::int8_linear (src/kernels/int8_linear.h) multiplies them against the
  activations as they are (no activation quantisation): a decode step streams the int8 bytes
  through era's CPU kernel, larger calls convert slices of the weight for LibTorch's GEMM. No
  quantisation engine is needed, every LibTorch and device runs it, and results are the same on
  both LibTorch routes.
- "dynamic" (DynamicInt8Linear; every int8 bundle exported before the schemes existed): LibTorch's
  dynamically quantised linear (quantized::linear_dynamic): the activations are quantised per
  call to 8 (or 7) bits, the products accumulate in int32, the output comes back in float32 and
  is rounded to the model dtype. LibTorch packs the weight for the engine the runtime selects at
  load (x86 / fbgemm on PyPI's LibTorch, oneDNN on Debian's 1.13); the bundle stores the portable
  (int8 weight, scales, bias) form. CPU only. Its int8 x int8 GEMM can be faster for prefill on
  CPUs with VNNI / AMX-INT8, but on Debian's 1.13 (oneDNN) decoding runs at half the bf16 speed.
  Without VNNI, x86 int8 kernels (fbgemm's and oneDNN's) multiply unsigned 8-bit activations
  with signed 8-bit weights into 16-bit pair sums that can saturate, so activations then use 7
  bits (`reduce_range`, True as exported; era's loader clears it on CPUs with VNNI).

Why per-channel: one outlier row would otherwise widen every row's step. Why no calibration: none
is needed by either scheme (no data can be downloaded here, and a user's export should not need
any).

The accuracy cost is model-specific: era measures logit error and greedy agreement against the
bfloat16 export on random models (README "CPU speed"); a real checkpoint's answers must be
checked with era_eval against its bf16 export before the int8 one is used.
"""
from typing import Optional

import torch
import torch.nn as nn

from . import era_ops  # noqa: F401  (defines era::int8_linear for scripting and checking)
from .llava_model import Linear

GEMV_MAX_ROWS = 4  # = kGemvMaxRows (src/kernels/cpu_gemv.h): the rows era's decode kernel takes

INT8_MODULES = ("decoder", "all")  # export_llava.py --int8 choices
INT8_SCHEMES = ("weight-only", "dynamic")  # export_llava.py --int8-scheme choices, default first


def quantize_rows(weight: torch.Tensor):
    """weight [out, in] -> (int8 [out, in], float32 scales [out]): symmetric per-row absmax."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
    q = torch.clamp(torch.round(w / scales[:, None]), -127, 127).to(torch.int8)
    return q, scales


class Int8Linear(nn.Module):
    """The "weight-only" scheme: a Linear whose weight is an int8 buffer with per-output-channel
    float32 scales, run by era::int8_linear (era_ops.py; src/kernels/int8_linear.h). The runtime
    sets gemv_max_rows (calls of at most that many rows run era's decode kernel; 0 = never) and
    cpu_upcast_min_rows (as Linear's: larger calls multiply in float32 on CPUs without bf16
    arithmetic). The bias stays in the model's dtype."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        q, scales = quantize_rows(linear.weight)
        self.register_buffer("weight", q)
        self.register_buffer("scales", scales)
        bias: Optional[torch.Tensor] = None
        if linear.bias is not None:
            bias = linear.bias.detach().clone()
        self.register_buffer("bias", bias)
        self.gemv_max_rows = GEMV_MAX_ROWS
        self.cpu_upcast_min_rows = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.era.int8_linear(x, self.weight, self.scales, self.bias, self.gemv_max_rows,
                                         self.cpu_upcast_min_rows)


class DynamicInt8Linear(nn.Module):
    """The "dynamic" scheme: a Linear whose weight is int8 with per-output-channel scales, run by
    LibTorch's dynamically quantised linear (see the module docstring). No learnable parameters:
    the packed weight is a LibTorch custom-class attribute that TorchScript saves as (int8
    weight, scales, bias) and re-packs at load."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        q, scales = quantize_rows(linear.weight)
        qweight = torch._make_per_channel_quantized_tensor(q, scales.double(),
                                                            torch.zeros_like(scales, dtype=torch.long), 0)
        bias: Optional[torch.Tensor] = None
        if linear.bias is not None:
            bias = linear.bias.detach().float()
        self._packed = torch.ops.quantized.linear_prepack(qweight, bias)
        self.reduce_range = True  # the runtime sets it per quantisation engine

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).float()
        y = torch.ops.quantized.linear_dynamic(rows, self._packed, self.reduce_range)
        shape = list(x.shape)
        shape[-1] = self.out_features
        return y.reshape(shape).to(x.dtype)


def quantize_module(module: nn.Module, scheme: str = INT8_SCHEMES[0]) -> int:
    """Replaces every era Linear under `module` with an Int8Linear ("weight-only") or a
    DynamicInt8Linear ("dynamic"), in place; returns how many."""
    if scheme not in INT8_SCHEMES:
        raise ValueError(f"int8 scheme {scheme!r}: not one of {', '.join(INT8_SCHEMES)}")
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, Linear):
            setattr(module, name, Int8Linear(child) if scheme == "weight-only" else DynamicInt8Linear(child))
            count += 1
        else:
            count += quantize_module(child, scheme)
    return count


def int8_available(scheme: str = INT8_SCHEMES[0]) -> bool:
    """Can this torch export and check `scheme`'s linears? "dynamic" needs a quantisation engine
    (some engine besides 'none'); "weight-only" runs anywhere."""
    if scheme == "weight-only":
        return True
    return any(e != "none" for e in torch.backends.quantized.supported_engines)
