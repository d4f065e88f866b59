"""How the reference fixtures write their files: float32 C-order .npy, indented .json."""
import json
import os

import numpy as np


def save(out, name, arr):
    np.save(os.path.join(out, name), np.ascontiguousarray(np.asarray(arr, dtype=np.float32)))


def write_json(out, name, obj):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
