"""Forked children share their parent's memory instead of copying it.

CPython's cyclic garbage collector writes to the header of every object it tracks, so one
collection in a forked child copies every page of the parent's heap that holds such an object:
some 220 MiB for a process that has imported TensorFlow, Beam and TFX, in every child. Objects
frozen just before the fork (gc.freeze, the remedy the gc module documents for this) are left out
of the child's collections; the parent unfreezes its own at once.
"""

from __future__ import annotations

import gc
import os

_registered = False


def share_parent_memory_with_forked_children() -> None:
    """Freezes the collector's objects around every fork of this process, from now on (once)."""
    global _registered
    if not _registered:
        os.register_at_fork(before=gc.freeze, after_in_parent=gc.unfreeze)
        _registered = True
