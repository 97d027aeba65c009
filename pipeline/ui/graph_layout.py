"""Lays out a lineage graph as a picture: nodes in columns by their longest path from a source
(ingest on the left, the pushed model on the right), edges as lines between box sides."""

from __future__ import annotations

import dataclasses

COLUMN_WIDTH, ROW_HEIGHT = 200, 70
BOX_WIDTH, BOX_HEIGHT = 170, 44
PADDING = 12


@dataclasses.dataclass(frozen=True)
class PlacedNode:
    label: str
    x: int
    y: int
    is_execution: bool
    link: tuple[str, dict] | None  # (Flask endpoint, its arguments)


@dataclasses.dataclass(frozen=True)
class PlacedEdge:
    source: str
    target: str
    key: str
    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def path(self) -> str:
        """SVG path data: straight to the next column; an edge that skips columns bends below
        the row, so it does not run behind the boxes it passes."""
        if self.x2 - self.x1 <= COLUMN_WIDTH:
            return f"M {self.x1} {self.y1} L {self.x2} {self.y2}"
        dip = max(self.y1, self.y2) + ROW_HEIGHT // 2 + BOX_HEIGHT // 4
        return (
            f"M {self.x1} {self.y1} C {self.x1 + 40} {dip}, {self.x2 - 40} {dip}, "
            f"{self.x2} {self.y2}"
        )


@dataclasses.dataclass(frozen=True)
class GraphPicture:
    nodes: tuple[PlacedNode, ...]
    edges: tuple[PlacedEdge, ...]
    width: int
    height: int
    box_width: int = BOX_WIDTH
    box_height: int = BOX_HEIGHT


def columns(edges: list[tuple[str, str]]) -> dict[str, int]:
    """node -> column: 0 for a node nothing points to, else one more than its deepest source.
    Edges that would close a cycle are ignored (lineage edges never do)."""
    nodes = list(dict.fromkeys(n for edge in edges for n in edge))
    sources: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target in edges:
        sources[target].append(source)
    depth: dict[str, int] = {}

    def visit(node: str, path: frozenset) -> int:
        if node not in depth:
            upstream = [visit(s, path | {node}) for s in sources[node] if s not in path]
            depth[node] = 1 + max(upstream) if upstream else 0
        return depth[node]

    for node in nodes:
        visit(node, frozenset())
    return depth


def lay_out(edges, is_execution, link_for) -> GraphPicture:
    """edges: (source, target, key) triples of node labels; is_execution(label) and
    link_for(label) say how each node is drawn and where it leads."""
    depth = columns([(source, target) for source, target, _ in edges])
    rows: dict[int, int] = {}
    places: dict[str, tuple[int, int]] = {}
    for node, column in depth.items():
        row = rows.get(column, 0)
        rows[column] = row + 1
        places[node] = (PADDING + column * COLUMN_WIDTH, PADDING + row * ROW_HEIGHT)
    nodes = tuple(
        PlacedNode(node, x, y, is_execution(node), link_for(node))
        for node, (x, y) in places.items()
    )
    placed_edges = tuple(
        PlacedEdge(
            source,
            target,
            key,
            places[source][0] + BOX_WIDTH,
            places[source][1] + BOX_HEIGHT // 2,
            places[target][0],
            places[target][1] + BOX_HEIGHT // 2,
        )
        for source, target, key in edges
    )
    width = PADDING * 2 + (max(depth.values(), default=0)) * COLUMN_WIDTH + BOX_WIDTH
    height = PADDING * 2 + max(rows.values(), default=1) * ROW_HEIGHT  # room for bent edges
    return GraphPicture(nodes, placed_edges, width, height)
