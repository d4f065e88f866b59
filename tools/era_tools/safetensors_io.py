"""Read and write `.safetensors` files, and load HF weight folders, with only stdlib + numpy + torch.

The `safetensors` package is not available here, so this is a small independent implementation of
the published format:

    [8 bytes: little-endian u64 N] [N bytes: JSON header, space padded] [data section]

The header maps every tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets are
relative to the start of the data section); the optional key "__metadata__" holds str -> str.

Reading memory-maps the file copy-on-write, so a multi-GB shard is paged in lazily and the returned
tensors are views of the mapping (no second copy). Every offset is validated before a view is made,
so a truncated or corrupt file gives a `SafetensorsError` naming the file instead of a crash.

`load_weights_folder` also understands sharded checkpoints (`*.index.json`) and legacy
`pytorch_model*.bin` files, which are only ever opened with `torch.load(weights_only=True)`.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

# safetensors dtype -> (numpy dtype of the raw little-endian bytes, torch dtype, bytes per element).
# bfloat16 has no numpy type: its bytes are read as int16 and reinterpreted with Tensor.view
# (torch 1.13 has no uint16, and int16 has the same size, which is all view() needs).
_DTYPES = {
    "F64": (np.dtype("<f8"), torch.float64, 8),
    "F32": (np.dtype("<f4"), torch.float32, 4),
    "F16": (np.dtype("<f2"), torch.float16, 2),
    "BF16": (np.dtype("<i2"), torch.bfloat16, 2),
    "I64": (np.dtype("<i8"), torch.int64, 8),
    "I32": (np.dtype("<i4"), torch.int32, 4),
    "I16": (np.dtype("<i2"), torch.int16, 2),
    "I8": (np.dtype("i1"), torch.int8, 1),
    "U8": (np.dtype("u1"), torch.uint8, 1),
    "BOOL": (np.dtype("?"), torch.bool, 1),
}
_TORCH_TO_ST = {torch_dtype: name for name, (_, torch_dtype, _) in _DTYPES.items()}

# A header larger than this is certainly corrupt (the real safetensors library uses the same cap).
_MAX_HEADER_BYTES = 100 * 1024 * 1024

if sys.byteorder != "little":  # the raw bytes are viewed in place, which assumes a LE host
    raise ImportError("era_tools.safetensors_io needs a little-endian host")


class WeightsFileError(ValueError):
    """A weights file (or sharded index) cannot be read. The message names the file."""


class SafetensorsError(WeightsFileError):
    """A .safetensors file is truncated, corrupt or uses an unsupported dtype."""


# ------------------------------------------------------------------------------------------------
# writing

def save_file(tensors, path, metadata=None):
    """Write a dict name -> torch.Tensor (any device; copied to CPU) as one .safetensors file.

    Tensors are laid out largest element size first (then by name) so every tensor starts on a
    multiple of its element size, as the reference writer does; readers can then view the
    memory map without copying.
    """
    prepared = []
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {name!r}")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in _TORCH_TO_ST:
            raise SafetensorsError(f"{path}: tensor '{name}' has unsupported dtype {t.dtype}")
        prepared.append((name, _TORCH_TO_ST[t.dtype], t.detach().cpu().contiguous()))
    prepared.sort(key=lambda item: (-_DTYPES[item[1]][2], item[0]))

    header = {}
    if metadata:
        bad = [k for k, v in metadata.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise TypeError(f"__metadata__ must map str to str (bad keys: {bad})")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, st_dtype, t in prepared:
        nbytes = t.numel() * _DTYPES[st_dtype][2]
        header[name] = {"dtype": st_dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes

    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)  # data section starts 8-byte aligned
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(header_bytes)))
            f.write(header_bytes)
            # one tensor's bytes at a time: a 7B model is never held twice
            for name, st_dtype, t in prepared:
                f.write(_tensor_bytes(t, st_dtype))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _tensor_bytes(t, st_dtype):
    if st_dtype == "BF16":
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return arr.astype(_DTYPES[st_dtype][0], copy=False).tobytes(order="C")


# ------------------------------------------------------------------------------------------------
# reading

def read_header(path):
    """Return (header dict without __metadata__, metadata dict, data section start, file size)."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise SafetensorsError(f"{path}: truncated or corrupt safetensors file "
                                       f"({size} bytes, shorter than the 8-byte header length)")
            (n,) = struct.unpack("<Q", head)
            if n > _MAX_HEADER_BYTES or n + 8 > size:
                raise SafetensorsError(f"{path}: truncated or corrupt safetensors file (header "
                                       f"length {n} but the file has {size} bytes)")
            raw = f.read(n)
    except OSError as e:
        raise SafetensorsError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: corrupt safetensors header (not JSON: {e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: corrupt safetensors header (not a JSON object)")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise SafetensorsError(f"{path}: corrupt safetensors header (__metadata__ is not an object)")
    data_start = 8 + n
    _validate_entries(path, header, size - data_start)
    return header, metadata, data_start, size


def _validate_entries(path, header, data_size):
    spans = []
    for name, info in header.items():
        where = f"{path}: tensor '{name}'"
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise SafetensorsError(f"{where}: corrupt header entry {info!r}")
        if info["dtype"] not in _DTYPES:
            raise SafetensorsError(f"{where}: unsupported dtype {info['dtype']!r} "
                                   f"(supported: {', '.join(_DTYPES)})")
        shape, offs = info["shape"], info["data_offsets"]
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            raise SafetensorsError(f"{where}: corrupt shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs) or
                not 0 <= offs[0] <= offs[1]):
            raise SafetensorsError(f"{where}: corrupt data_offsets {offs!r}")
        need = int(np.prod(shape, dtype=np.int64)) * _DTYPES[info["dtype"]][2]
        if offs[1] - offs[0] != need:
            raise SafetensorsError(f"{where}: data_offsets {offs} span {offs[1] - offs[0]} bytes "
                                   f"but {info['dtype']}{shape} needs {need}")
        if offs[1] > data_size:
            raise SafetensorsError(f"{path}: truncated or corrupt safetensors file: tensor "
                                   f"'{name}' needs data bytes [{offs[0]}, {offs[1]}) but the "
                                   f"data section has only {data_size} bytes")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise SafetensorsError(f"{path}: corrupt safetensors file: tensors '{n0}' and '{n1}' "
                                   f"overlap")


def load_file(path, names=None):
    """Load a .safetensors file -> (dict name -> CPU tensor, metadata dict).

    `names` (optional iterable) restricts which tensors are materialised. The tensors are
    copy-on-write views of a memory map: writing to them never touches the file.
    """
    path = os.fspath(path)
    header, metadata, data_start, size = read_header(path)
    wanted = header.keys() if names is None else [n for n in names if n in header]
    out = {}
    if size == data_start or not wanted:
        mm = None
    else:
        try:
            mm = np.memmap(path, dtype=np.uint8, mode="c")
        except (OSError, ValueError) as e:
            raise SafetensorsError(f"{path}: cannot map file: {e}") from None
    for name in wanted:
        info = header[name]
        np_dtype, torch_dtype, itemsize = _DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        count = (end - begin) // itemsize
        if count == 0:
            out[name] = torch.empty(info["shape"], dtype=torch_dtype)
            continue
        raw = mm[data_start + begin:data_start + end]
        if (data_start + begin) % itemsize:
            raw = np.array(raw)  # unaligned (foreign writer): copy so the typed view is aligned
        arr = raw.view(np_dtype).reshape(info["shape"])
        t = torch.from_numpy(arr)
        if torch_dtype == torch.bfloat16:
            t = t.view(torch.bfloat16)
        out[name] = t
    return out, metadata


# ------------------------------------------------------------------------------------------------
# HF weight folders

SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
BIN_SINGLE = "pytorch_model.bin"
BIN_INDEX = "pytorch_model.bin.index.json"


def load_bin_file(path):
    """A legacy pytorch_model*.bin state dict, unpickled with weights_only=True (never arbitrary
    code)."""
    path = os.fspath(path)
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types (UnpicklingError, RuntimeError, EOFError)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WeightsFileError(f"{path}: cannot load with torch.load(weights_only=True): {msg}") \
            from None
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise WeightsFileError(f"{path}: not a state dict of tensors")
    return dict(sd)


def _load_any(path):
    if path.endswith(".safetensors"):
        return load_file(path)[0]
    return load_bin_file(path)


def _load_index(folder, index_name):
    index_path = os.path.join(folder, index_name)
    try:
        with open(index_path, "r", encoding="utf-8") as f:
            index = json.load(f)
        weight_map = index["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("weight_map is not an object")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise WeightsFileError(f"{index_path}: cannot read shard index ({e})") from None
    out = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = os.path.join(folder, shard)
        if not os.path.isfile(shard_path):
            raise WeightsFileError(f"{index_path}: shard file {shard} is missing")
        tensors = _load_any(shard_path)
        for name, t in tensors.items():
            if name in out:
                raise WeightsFileError(f"{shard_path}: tensor '{name}' also appears in another shard")
            out[name] = t
    for name, shard in weight_map.items():
        if name not in out:
            raise WeightsFileError(f"{os.path.join(folder, shard)}: tensor '{name}' listed in "
                                   f"{index_name} is not in the shard")
    return out


def weights_files(folder):
    """Which weight file(s) of `folder` would be loaded (for messages)."""
    for name in (SAFETENSORS_SINGLE, SAFETENSORS_INDEX, BIN_SINGLE, BIN_INDEX):
        if os.path.isfile(os.path.join(folder, name)):
            return name
    return None


def load_weights_folder(folder):
    """All tensors of an HF checkpoint folder, from the first of: model.safetensors,
    model.safetensors.index.json (+ shards), pytorch_model.bin, pytorch_model.bin.index.json."""
    folder = os.fspath(folder)
    which = weights_files(folder)
    if which is None:
        raise WeightsFileError(f"{folder}: no weights found (expected {SAFETENSORS_SINGLE}, "
                               f"{SAFETENSORS_INDEX}, {BIN_SINGLE} or {BIN_INDEX})")
    if which.endswith(".index.json"):
        return _load_index(folder, which)
    return _load_any(os.path.join(folder, which))
