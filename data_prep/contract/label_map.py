"""Label ids that never change meaning: a span's label map merged onto the pipeline's reference.

Sorting each span's class names anew would hand an id to another class as soon as a class is
added or removed, and a model would then be compared with (or replace) one whose outputs mean
other classes. The reference (the label map of the data the blessed model was trained on, or the
pipeline's first span) keeps its ids; a new class gets the next unused id.
"""

from __future__ import annotations

import dataclasses


def merge_label_map(reference: dict[str, int], class_names) -> dict[str, int]:
    """The label map of a span with these classes: the reference's id for a known class, the next
    ids after the reference's largest (in name order) for new ones. A reference class absent from
    the span keeps its id reserved, so no new class can take it."""
    names = sorted(set(class_names))
    next_id = max(reference.values(), default=-1) + 1
    merged = {}
    for name in names:
        if name in reference:
            merged[name] = reference[name]
    for name in names:
        if name not in reference:
            merged[name] = next_id
            next_id += 1
    return dict(sorted(merged.items(), key=lambda item: item[1]))


def names_by_id(label_map: dict[str, int]) -> list[str]:
    """The class names in id order (a gone class's id simply missing)."""
    return sorted(label_map, key=label_map.get)


def class_names(label_map: dict[str, int]) -> list[str]:
    """The class names in id order, as a model's outputs are. The gate stops a span that lacks a
    reference class, so the ids a model trains on are 0..n-1; anything else is refused here."""
    names = names_by_id(label_map)
    if [label_map[name] for name in names] != list(range(len(names))):
        raise ValueError(f"label ids are not 0..{len(names) - 1}: {label_map}")
    return names


@dataclasses.dataclass(frozen=True)
class ClassChange:
    """How a span's class set differs from the reference's."""

    added: tuple[str, ...]
    removed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)

    def describe(self) -> str:
        parts = []
        if self.added:
            parts.append(f"new class(es) {', '.join(self.added)}")
        if self.removed:
            parts.append(f"class(es) gone {', '.join(self.removed)}")
        return " and ".join(parts) or "no class change"


def class_change(reference: dict[str, int], label_map: dict[str, int]) -> ClassChange:
    return ClassChange(
        added=tuple(sorted(set(label_map) - set(reference))),
        removed=tuple(sorted(set(reference) - set(label_map))),
    )
