"""int8 weights for an era bundle (export_llava.py --int8 decoder|all).

Every era Linear of the chosen modules becomes an Int8Linear: its weight stored as int8 with one
float32 scale per output channel (symmetric: scale = max |w| / 127 over the row), run on the CPU
by LibTorch's dynamically quantised linear (quantized::linear_dynamic): the activations are
quantised per call to 8 (or 7) bits, the products accumulate in int32, the output comes back in float32
and is rounded to the model dtype. LibTorch packs the weight for the engine the runtime selects
at load (x86 / fbgemm on PyPI's LibTorch, oneDNN on Debian's 1.13); the bundle stores the
portable (int8 weight, scales, bias) form.

Why per-channel: one outlier row would otherwise widen every row's step. Why dynamic activations:
no calibration data is needed (none can be downloaded here, and a user's export should not need
any). Without VNNI, x86 int8 kernels (fbgemm's and oneDNN's) multiply unsigned 8-bit activations
with signed 8-bit weights into 16-bit pair sums that can saturate, so activations then use 7
bits (`reduce_range`, True as exported; era's loader clears it on CPUs with VNNI).

The accuracy cost is model-specific: era measures logit error and greedy agreement against the
bfloat16 export on random models (README "CPU speed"); a real checkpoint's answers must be
checked with era_eval against its bf16 export before the int8 one is used.
"""
from typing import Optional

import torch
import torch.nn as nn

from .llava_model import Linear

INT8_MODULES = ("decoder", "all")  # export_llava.py --int8 choices


def quantize_rows(weight: torch.Tensor):
    """weight [out, in] -> (int8 [out, in], float32 scales [out]): symmetric per-row absmax."""
    w = weight.detach().float()
    scales = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
    q = torch.clamp(torch.round(w / scales[:, None]), -127, 127).to(torch.int8)
    return q, scales


class Int8Linear(nn.Module):
    """A Linear whose weight is int8 with per-output-channel scales (see the module docstring).
    No learnable parameters: the packed weight is a LibTorch custom-class attribute that
    TorchScript saves as (int8 weight, scales, bias) and re-packs at load."""

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


def quantize_module(module: nn.Module) -> int:
    """Replaces every era Linear under `module` with an Int8Linear, in place; returns how many."""
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, Linear):
            setattr(module, name, Int8Linear(child))
            count += 1
        else:
            count += quantize_module(child)
    return count


def int8_available() -> bool:
    """Can this torch pack and run int8 linears on the CPU (some engine besides 'none')?"""
    return any(e != "none" for e in torch.backends.quantized.supported_engines)
