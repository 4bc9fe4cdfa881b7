"""An entity's neighbourhood drawn as SVG on the server: a small force-directed layout.

Fruchterman-Reingold (1991): nodes repel with k²/d, edges pull with d²/k, the step
cools linearly. The centre entity is pinned in the middle, so the picture reads as "this
and what is next to it". Deterministic (start positions on a circle, no randomness), so
the same graph gives the same picture. A few dozen nodes at most: O(n²) per step is
nothing at that size, and no JavaScript is needed in the page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 640, 420
MARGIN = 60
STEPS = 60  # enough to settle ≤ 11 nodes (a centre and its 10 neighbours); ~5 ms
SPREAD = 0.45  # shortens FR's ideal length sqrt(area / n): a star fills the box, not its rim


@dataclass(frozen=True, slots=True)
class Node:
    key: str
    label: str
    href: str


@dataclass(frozen=True, slots=True)
class Edge:
    a: int  # node indexes
    b: int
    weight: float
    label: str = ""


def layout(count: int, edges: Sequence[Edge], steps: int = STEPS) -> list[tuple[float, float]]:
    """Positions of ``count`` nodes in [0, 1]², node 0 pinned at the centre."""
    if count == 0:
        return []
    pos = [(0.5, 0.5)] + [
        (
            0.5 + 0.35 * math.cos(2 * math.pi * i / max(1, count - 1)),
            0.5 + 0.35 * math.sin(2 * math.pi * i / max(1, count - 1)),
        )
        for i in range(count - 1)
    ]
    k = SPREAD * math.sqrt(1.0 / count)  # the ideal edge length
    for step in range(steps):
        heat = 0.1 * (1 - step / steps)
        moves = [[0.0, 0.0] for _ in range(count)]
        for i in range(count):
            for j in range(i + 1, count):
                dx, dy = pos[i][0] - pos[j][0], pos[i][1] - pos[j][1]
                d = max(math.hypot(dx, dy), 1e-3)
                push = k * k / d
                moves[i][0] += dx / d * push
                moves[i][1] += dy / d * push
                moves[j][0] -= dx / d * push
                moves[j][1] -= dy / d * push
        for edge in edges:
            dx = pos[edge.a][0] - pos[edge.b][0]
            dy = pos[edge.a][1] - pos[edge.b][1]
            d = max(math.hypot(dx, dy), 1e-3)
            pull = d * d / k
            for node, sign in ((edge.a, -1), (edge.b, 1)):
                moves[node][0] += sign * dx / d * pull
                moves[node][1] += sign * dy / d * pull
        for i in range(1, count):  # node 0 stays pinned
            length = max(math.hypot(*moves[i]), 1e-9)
            shift = min(length, heat)
            x = pos[i][0] + moves[i][0] / length * shift
            y = pos[i][1] + moves[i][1] / length * shift
            pos[i] = (min(1.0, max(0.0, x)), min(1.0, max(0.0, y)))
    return pos


def graph_svg(nodes: Sequence[Node], edges: Sequence[Edge]) -> str:
    """The neighbourhood as an ``<svg>`` element: edges (thicker when heavier), then each
    node as a circle and a linked label. Labels are escaped; empty graph → ''."""
    if not nodes:
        return ""
    points = [
        (MARGIN + x * (WIDTH - 2 * MARGIN), MARGIN + y * (HEIGHT - 2 * MARGIN))
        for x, y in layout(len(nodes), edges)
    ]
    heaviest = max((e.weight for e in edges), default=1.0) or 1.0
    parts = [
        f'<svg class="graph" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'role="img" aria-label="entity neighbourhood" xmlns="http://www.w3.org/2000/svg">'
    ]
    for e in edges:
        (x1, y1), (x2, y2) = points[e.a], points[e.b]
        width = 1 + 3 * e.weight / heaviest
        title = html.escape(e.label or "co-mentioned")
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke-width="{width:.1f}"><title>{title} ×{e.weight:g}</title></line>'
        )
    for i, (node, (x, y)) in enumerate(zip(nodes, points, strict=True)):
        css = "node centre" if i == 0 else "node"
        parts.append(
            f'<a href="{html.escape(node.href)}"><g class="{css}">'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{9 if i == 0 else 6}"/>'
            f'<text x="{x:.1f}" y="{y - 12:.1f}">{html.escape(node.label[:40])}</text></g></a>'
        )
    parts.append("</svg>")
    return "".join(parts)
