"""How the reference fixtures and the Python tests read and write their files: float32 C-order
.npy, indented UTF-8 .json."""
import json
import os

import numpy as np


def save(out, name, arr):
    np.save(os.path.join(out, name), np.ascontiguousarray(np.asarray(arr, dtype=np.float32)))


def read_json(path):
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def dump_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def write_json(out, name, obj):
    dump_json(os.path.join(out, name), obj)
