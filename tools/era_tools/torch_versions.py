"""Which torch versions may export era bundles, and the exporter's only calls into TorchScript.

era's bundles are TorchScript: the one format both LibTorch routes load (Debian's 1.13 has no
torch.export / AOTInductor loader). TorchScript is deprecated: since torch 2.11
`torch.jit.script`, `torch.jit.save` and `torch.jit.load` warn (DeprecationWarning; from 2.14
`save` / `load` warn with FutureWarning, shown to every user), and upstream plans to turn the
warnings into errors (pytorch/pytorch#189705). So the exporter runs only on the versions listed in
EXPORT_TORCH, the ones the project's tests export with and whose bundles were measured to load
(tools/README.md, "Torch versions"); every other version is refused at startup.
"""
import contextlib
import re
import warnings

import torch

from . import era_ops  # noqa: F401  (bundles may call era::gemv: loading needs its schema)

# THE table: (major, minor) -> where that torch comes from. Any patch release of these.
#   1.13: Debian's python3-torch (the Debian route, `/usr/bin/python3`).
#   2.11: the PyPI route's pin (tools/requirements-pypi.txt), what the lent GPU machines run.
# Both write TorchScript file format 10 and load each other's math bundles (measured); 2.12 to
# 2.15 are not tested by CI (and 2.14 makes the deprecation a visible FutureWarning), 2.0 to 2.10
# are not tested either. The C++ loader's list of tested exporters (src/model/export_compat.cpp)
# names the same versions.
EXPORT_TORCH = {
    (1, 13): "Debian's python3-torch (Debian route)",
    (2, 11): "the PyPI route's pinned torch (tools/requirements-pypi.txt)",
}


class UnsupportedTorch(Exception):
    """The running torch is not in EXPORT_TORCH."""


def parse_version(text):
    """'2.11.0+cu130', '1.13.0a0' -> (2, 11), (1, 13); None when it does not start with N.N."""
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def supported_list():
    """'1.13.x or 2.11.x'."""
    names = [f"{a}.{b}.x" for a, b in sorted(EXPORT_TORCH)]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def check_export_torch(version=None):
    """Raises UnsupportedTorch unless `version` (default: the running torch.__version__) is one of
    EXPORT_TORCH."""
    version = torch.__version__ if version is None else version
    if parse_version(version) in EXPORT_TORCH:
        return
    raise UnsupportedTorch(
        f"torch {version} cannot export era bundles: the exporter works with torch "
        f"{supported_list()} only (TorchScript is deprecated since torch 2.11 and other versions "
        f"are untested); install one of them, e.g. `pip install 'torch==2.11.*'`, or use "
        f"Debian's python3-torch (1.13)")


# Exactly the "X is deprecated" messages of torch.jit.script / save / load. The exporter's
# output *is* TorchScript by design (see the module docstring): the warning tells the user
# nothing they can act on, and the version gate above is where the deprecation is handled. Other
# TorchScript warnings stay visible, notably "not supported in Python 3.14+ and may break".
_DEPRECATION = r"`torch\.jit\.(script|save|load)` is deprecated"


@contextlib.contextmanager
def quiet_deprecation():
    with warnings.catch_warnings():
        for category in (DeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", message=_DEPRECATION, category=category)
        yield


def script(module):
    with quiet_deprecation():
        return torch.jit.script(module)


def save(scripted, path):
    with quiet_deprecation():
        scripted.save(path)


def load(path, map_location=None):
    with quiet_deprecation():
        return torch.jit.load(path, map_location=map_location)
