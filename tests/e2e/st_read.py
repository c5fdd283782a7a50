# Reads safetensors files for the end-to-end scripts (no dependencies): read(path) gives
# ({name: (dtype, shape, raw bytes)}, metadata); floats(entry) the values of an F32/F64 entry.
import json
import struct
from array import array


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    return {name: (t["dtype"], tuple(t["shape"]), b[base + t["data_offsets"][0]: base + t["data_offsets"][1]])
            for name, t in header.items()}, meta


def floats(entry):
    dtype, _, data = entry
    a = array({"F32": "f", "F64": "d"}[dtype])
    a.frombytes(data)
    return a
