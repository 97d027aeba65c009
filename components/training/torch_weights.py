"""Reads PyTorch's legacy weights files (.pth, the format before torch 1.6) with NumPy alone.

Such a file is a run of pickles (a magic number, the format version, the writer's byte order and
type sizes, the state dict, the list of its storage keys) followed by each storage's raw bytes,
its element count first. The state dict refers to storages by key and rebuilds each tensor with
torch._utils._rebuild_tensor_v2; here a restricted unpickler maps exactly those globals to
NumPy, and refuses every other one, so reading a file runs no code from it and needs no torch.
"""

from __future__ import annotations

import collections
import dataclasses
import pickle
import struct

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
LEGACY_VERSION = 1001  # torch.serialization.PROTOCOL_VERSION
STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


@dataclasses.dataclass(frozen=True)
class _StorageType:
    dtype: type


@dataclasses.dataclass(frozen=True)
class _TensorRef:
    """Where a tensor's values are: its storage, first element, shape and strides (elements)."""

    storage: str
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def _rebuild_tensor(storage, offset, shape, strides, *_unused) -> _TensorRef:
    """Stands in for torch._utils._rebuild_tensor_v2 (requires_grad and hooks are ignored)."""
    return _TensorRef(storage, offset, tuple(shape), tuple(strides))


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals a state dict of tensors uses; records each storage's dtype."""

    def __init__(self, handle):
        super().__init__(handle)
        self.storages: dict[str, tuple[type, int]] = {}

    def find_class(self, module: str, name: str):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a weights file")

    def persistent_load(self, pid):
        kind, storage_type, key, _location, size, view = pid
        if kind != "storage" or not isinstance(storage_type, _StorageType) or view is not None:
            raise pickle.UnpicklingError(f"unsupported storage reference {pid[:3]}")
        self.storages[key] = (storage_type.dtype, int(size))
        return key


def read_legacy_pth(path: str) -> dict[str, np.ndarray]:
    """The state dict of a legacy .pth file: parameter name -> NumPy array, in file order."""
    with open(path, "rb") as handle:
        unpickler = _RestrictedUnpickler(handle)
        if unpickler.load() != LEGACY_MAGIC:
            raise ValueError(f"{path} is not a legacy PyTorch weights file")
        if unpickler.load() != LEGACY_VERSION:
            raise ValueError(f"{path}: unsupported PyTorch format version")
        if not unpickler.load().get("little_endian"):
            raise ValueError(f"{path} was written big-endian")
        state = unpickler.load()
        keys = unpickler.load()
        buffers = {}
        for key in keys:
            dtype, size = unpickler.storages[key]
            (count,) = struct.unpack("<q", handle.read(8))
            if count != size:
                raise ValueError(f"{path}: storage {key} holds {count} values, expected {size}")
            data = handle.read(count * np.dtype(dtype).itemsize)
            buffers[key] = np.frombuffer(data, dtype=dtype, count=count)
    return {name: _materialize(ref, buffers) for name, ref in state.items()}


def _materialize(ref: _TensorRef, buffers: dict[str, np.ndarray]) -> np.ndarray:
    storage = buffers[ref.storage]
    itemsize = storage.itemsize
    return np.lib.stride_tricks.as_strided(
        storage[ref.offset :],
        shape=ref.shape,
        strides=tuple(stride * itemsize for stride in ref.strides),
        writeable=False,
    ).copy()
