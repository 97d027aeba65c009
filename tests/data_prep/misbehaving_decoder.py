"""A Pillow format whose decoder misbehaves on purpose, as a broken C decoder would: a file that
starts with `MISBEHAVE:<how>` opens as an 8x8 RGB image, and loading it then segfaults, hangs,
or allocates far more memory than a decode may take (in C, through Pillow's own allocator).

Registered through Pillow's public plugin API when this module is imported: import it before
any process that decodes is forked (test modules are imported at collection, before any test).
"""

from __future__ import annotations

import ctypes
import time

from PIL import Image, ImageFile

FORMAT = "MISBEHAVE"
SEGFAULT, HANG, OVER_ALLOCATE = b"segfault", b"hang", b"over_allocate"
OVER_ALLOCATE_SIDE = 16_000  # 16,000^2 RGB pixels: 1 GB


def misbehaving(how: bytes) -> bytes:
    """The bytes of a file whose decode does `how`."""
    return f"{FORMAT}:".encode() + how + b"\n"


class MisbehavingImageFile(ImageFile.ImageFile):
    format = FORMAT
    format_description = "a decoder that fails on purpose"

    def _open(self) -> None:
        self._how = self.fp.read(64).split(b":", 1)[1].strip()
        self._mode = "RGB"
        self._size = (8, 8)

    def load(self):
        if self._how == SEGFAULT:
            ctypes.string_at(0)  # reads address 0
        elif self._how == HANG:
            time.sleep(3600)
        elif self._how == OVER_ALLOCATE:
            Image.new("RGB", (OVER_ALLOCATE_SIDE, OVER_ALLOCATE_SIDE))
        return super().load()


def _accept(prefix: bytes) -> bool:
    return prefix.startswith(f"{FORMAT}:".encode())


Image.register_open(FORMAT, MisbehavingImageFile, _accept)
