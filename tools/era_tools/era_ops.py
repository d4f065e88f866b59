"""The `era::` TorchScript operators that exported bundles may call, defined for Python.

The C++ runtime registers these operators with its own kernels (src/kernels/cpu_gemv.h); Python
needs them too, with the reference formula, so that TorchScript can compile modules that call
them (tools/era_tools/llava_model.py) and torch.jit.load can open such bundles (tests, tools).
The schemas are part of the bundle format: never change one, add a new operator instead.

  era::gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor
      = F.linear(x, weight, bias). In C++: the decode step's product for a few rows with bf16 /
      fp16 weights, widened to float32 in registers (AVX2 + FMA).
  era::int8_linear(Tensor x, Tensor weight, Tensor scales, Tensor? bias, int gemv_max_rows,
                   int upcast_min_rows) -> Tensor
      = (x @ weight^T) * scales + bias for an int8 weight with per-row float32 scales, the sums in
      float32 (upcast_min_rows > 0 and at least that many rows: the GEMM in float32), rounded to
      x's dtype. In C++ (src/kernels/int8_linear.h): era's kernel for at most gemv_max_rows rows,
      slices of the weight converted for LibTorch's GEMM above that.
  era::onednn_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor
      = F.linear(x, weight, bias), where the weight may be one packed for oneDNN (an MKLDNN tensor
      from torch.ops.mkldnn._reorder_linear_weight): then torch.ops.mkldnn._linear_pointwise. The
      C++ runtime packs the vision tower's and projector's bf16 weights at load on CPUs with
      native bf16 arithmetic (src/kernels/onednn_linear.h) and sets the Linear's `onednn_packed`.
  era::widened_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor
      = F.linear(x, weight, bias) with the products and sums in float32, rounded once to x's
      dtype. In C++ (src/kernels/cpu_widened_linear.h): the weight converted a slice at a time into
      a buffer kept per thread, LibTorch's float32 GEMM writing each slice's columns in place.
      Linear calls it where the runtime widens bf16 / fp16 products on the CPU.
  era::widened_attention(Tensor q, Tensor k, Tensor v, float scale, int causal_offset,
                         bool causal) -> Tensor
      = HF's eager attention of a bf16 / fp16 model with float32 products: S = (q @ k^T) rounded
      to q's dtype, times scale, the softmax in float32 (keys after causal_offset + t at -inf
      where causal) rounded to q's dtype, times v in float32, rounded. In C++
      (src/kernels/cpu_widened_attention.h): one head at a time, its scores kept in cache. The math
      attention cores call it where the runtime widens products on the CPU.
"""
import torch
import torch.nn.functional as F

SCHEMAS = {"gemv": "gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor",
           "int8_linear": "int8_linear(Tensor x, Tensor weight, Tensor scales, Tensor? bias, "
                          "int gemv_max_rows, int upcast_min_rows) -> Tensor",
           "onednn_linear": "onednn_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor",
           "widened_linear": "widened_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor",
           "widened_attention": "widened_attention(Tensor q, Tensor k, Tensor v, float scale, "
                                "int causal_offset, bool causal) -> Tensor"}


def _gemv(x, weight, bias):
    return F.linear(x, weight, bias)


def _int8_linear(x, weight, scales, bias, gemv_max_rows, upcast_min_rows):
    rows = x.numel() // max(x.shape[-1], 1)
    dtype = torch.float32 if 0 < upcast_min_rows <= rows else x.dtype
    y = F.linear(x.to(dtype), weight.to(dtype)).float() * scales.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def _onednn_linear(x, weight, bias):
    if weight.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], None)
    return F.linear(x, weight, bias)


def _widened_linear(x, weight, bias):
    return F.linear(x.float(), weight.float(), None if bias is None else bias.float()).to(x.dtype)


def _widened_attention(q, k, v, scale, causal_offset, causal):
    s = (torch.matmul(q.float(), k.float().transpose(-1, -2)).to(q.dtype) * scale).float()
    if causal:
        tq, tk = q.shape[2], k.shape[2]
        query_pos = torch.arange(tq, device=q.device).unsqueeze(1) + causal_offset
        s = s.masked_fill(torch.arange(tk, device=q.device).unsqueeze(0) > query_pos, float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)
    return torch.matmul(p.float(), v.float()).to(q.dtype)


_KERNELS = {"gemv": _gemv, "int8_linear": _int8_linear, "onednn_linear": _onednn_linear,
            "widened_linear": _widened_linear, "widened_attention": _widened_attention}


def _defined(name):
    try:
        getattr(torch.ops.era, name)
        return True
    except (AttributeError, RuntimeError):
        return False


def _register():
    """Defines the operators unless this process already has them (a second import of this file
    under another module name, or a host that loaded era's C++ library). Returns the Library,
    which must stay alive: collecting it unregisters the operators."""
    if all(_defined(name) for name in SCHEMAS):
        return None
    lib = torch.library.Library("era", "DEF")  # torch 1.13 has no "FRAGMENT" kind
    for name, schema in SCHEMAS.items():
        lib.define(schema)
        # CPU and CUDA rather than CompositeExplicitAutograd: the key torch 1.13 also accepts
        # for Python kernels.
        for key in ("CPU", "CUDA"):
            lib.impl(name, _KERNELS[name], key)
    # A packed weight is an MKLDNN tensor, which dispatches on its own key.
    lib.impl("onednn_linear", _onednn_linear, "MkldnnCPU")
    return lib


_LIBRARY = _register()
