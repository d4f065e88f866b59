"""The `era::` TorchScript operators that exported bundles may call, defined for Python.

The C++ runtime registers these operators with its own kernels (src/model/cpu_gemv.h); Python
needs them too, with the reference formula, so that TorchScript can compile modules that call
them (tools/era_tools/llava_model.py) and torch.jit.load can open such bundles (tests, tools).
The schemas are part of the bundle format: never change one, add a new operator instead.

  era::gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor
      = F.linear(x, weight, bias). In C++: the decode step's product for a few rows with bf16 /
      fp16 weights, widened to float32 in registers (AVX2 + FMA).
"""
import torch
import torch.nn.functional as F

SCHEMAS = {"gemv": "gemv(Tensor x, Tensor weight, Tensor? bias) -> Tensor"}


def _gemv(x, weight, bias):
    return F.linear(x, weight, bias)


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
    lib = torch.library.Library("era", "DEF")
    lib.define(SCHEMAS["gemv"])
    # CPU and CUDA rather than CompositeExplicitAutograd: the key torch 1.13 also accepts for
    # Python kernels.
    for key in ("CPU", "CUDA"):
        lib.impl("gemv", _gemv, key)
    return lib


_LIBRARY = _register()
