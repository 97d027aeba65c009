"""Garbage collections that leave the objects already alive out, for a block of work.

A full collection walks every tracked object of the process: in the ingest's process, Beam's
modules and the pipeline make some 500,000, which the work at hand (20,000 files' outcomes, a
child's images) never makes garbage of. Two places pay for that walk: a forked child, whose
collections also write to every inherited object's header and so copy the pages it shares with
its parent, and the driver's planning, which makes enough objects to start full collections.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def existing_objects_frozen() -> Iterator[None]:
    """Inside the block, collections walk only objects made inside it; the objects that existed
    before are collected again once it exits. A process forked inside keeps them frozen for
    good. Not for nesting: the inner block's exit would unfreeze the outer block's objects."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
