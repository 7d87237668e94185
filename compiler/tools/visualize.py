"""Draw a built model's fused graph as SVG: what FuseOps made of it, optionally with times.

Input is the graph JSON relay.build writes (so an exported module draws as well as a fresh
build): one box per graph node, labelled with the Relay ops fused into its kernel (the
"relay_ops" node attribute) and listing the params it reads (grey lines), one box per graph
input and per graph output, and one edge per tensor a node reads from another box, labelled
with the tensor's shape. Given node times, a kernel box is shaded by its time and shows it.

The layered layout comes from grandalf (Sugiyama, as graphviz's dot; pure Python, the
optional `viz` extra); the SVG is written here. Element classes, for styling and tests:
`g.node.kernel` (with `nop` for reshape-only nodes), `g.node.input`, `g.node.output`,
`g.edge`; param lines are `text.note`.
"""
from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from compiler.errors import CompilerError
from runtime.graph_json import CONCAT, NOP, parse_graph

__all__ = ["draw_graph", "render", "Box", "shape_text", "wrap", "heat", "require_layout_library",
           "VizDependencyError"]

CHAR_WIDTH = 7.2  # px per character of the 12 px monospace font
LINE_HEIGHT = 15
PAD = 8
LINE_CHARS = 34  # wrap op lists at this width


class VizDependencyError(CompilerError):
    """grandalf (the layout library) is not installed."""


class Box:
    """A grandalf vertex view: size in, centre (xy) out."""

    def __init__(self, kind: str, lines: list[str], notes: list[str], title: str,
                 fill: str | None = None):
        self.kind, self.lines, self.notes, self.title, self.fill = kind, lines, notes, title, fill
        self.w = max(len(line) for line in lines + notes) * CHAR_WIDTH + 2 * PAD
        self.h = len(lines + notes) * LINE_HEIGHT + 2 * PAD
        self.xy = (0.0, 0.0)


class _Path:
    """A grandalf edge view: the routed polyline arrives through setpath."""

    def __init__(self, label: str):
        self.label = label
        self.points: list[tuple[float, float]] = []

    def setpath(self, points) -> None:
        self.points = [(float(x), float(y)) for x, y in points]


def shape_text(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def wrap(items: list[str], width: int = LINE_CHARS) -> list[str]:
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + 3 + len(item) > width:
            lines.append("")
        lines[-1] += (" + " if lines[-1] else "") + item
    return lines


def heat(fraction: float) -> str:
    """White (no time) to red (the slowest node)."""
    f = min(max(fraction, 0.0), 1.0)
    return f"#ff{int(255 - 180 * f):02x}{int(255 - 200 * f):02x}"


def require_layout_library() -> None:
    """Raise VizDependencyError, saying how to install it, when grandalf is missing (an
    optional dependency, so it is imported only when a graph is drawn)."""
    if importlib.util.find_spec("grandalf") is None:
        raise VizDependencyError("drawing the graph needs the grandalf layout library: "
                                 "pip install 'relayjit[viz]'")


def draw_graph(graph_json: str, params: Iterable[str] = (),
               node_times: Mapping[str, float] | None = None, title: str = "") -> str:
    """SVG text of the graph; `params` names the inputs that are bound params; node_times
    (seconds by node name, e.g. from a debug_executor profile) shades and labels kernels."""
    require_layout_library()
    plan = parse_graph(graph_json)  # validates everything used below
    graph = json.loads(graph_json)
    param_names = set(params)
    owner: dict[int, int] = {}  # entry -> the node id producing it
    inputs = {}  # node id -> (name, entry) of the graph inputs that are not params
    for nid, name, entry in zip(graph["arg_nodes"], plan.input_names, plan.input_entries):
        owner[entry] = nid
        if name not in param_names:
            inputs[nid] = (name, entry)
    for op in plan.ops:
        owner.update((e, op.nid) for e in op.outputs)
    times = dict(node_times or {})
    total, slowest = sum(times.values()), max(times.values(), default=0.0)
    vertices: dict[int, Box] = {}
    edges: list[tuple[int, int, str]] = []

    def add_vertex(key: int, box: Box) -> None:
        vertices[key] = box

    def add_edge(entry: int, dst: int) -> None:
        edges.append((owner[entry], dst, shape_text(plan.shapes[entry])))

    for nid, (name, entry) in inputs.items():
        shape = shape_text(plan.shapes[entry])
        add_vertex(nid, Box("input", [f"input {name}", shape], [], f"input {name}: {shape}"))
    for op in plan.ops:
        params_read = [f"param {graph['nodes'][owner[e]]['name']}: "
                       f"{shape_text(plan.shapes[e])}" for e in op.inputs
                       if owner[e] not in vertices]
        reads = [e for e in op.inputs if owner[e] in vertices]
        seconds = times.get(graph["nodes"][op.nid]["name"])
        add_vertex(op.nid, _kernel_box(graph["nodes"][op.nid], params_read, seconds,
                                       total, slowest))
        for e in reads:
            add_edge(e, op.nid)
    for i, entry in enumerate(plan.outputs):
        add_vertex(-1 - i, Box("output", [f"output {i}"], [], f"graph output {i}"))
        add_edge(entry, -1 - i)
    return render(vertices, edges, title)


def render(boxes: Mapping[Any, Box], edges: Iterable[tuple[Any, Any, str]],
           title: str = "") -> str:
    """SVG text of boxes (key -> Box) joined by edges (source key, target key, label),
    laid out in layers (the edges must not make a cycle)."""
    require_layout_library()
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout
    from grandalf.routing import route_with_lines
    vertices = {}
    for key, box in boxes.items():
        vertices[key] = Vertex(box)
        vertices[key].view = box
    links = []
    for src, dst, label in edges:
        links.append(Edge(vertices[src], vertices[dst]))
        links[-1].view = _Path(label)
    _layout(Graph(list(vertices.values()), links), SugiyamaLayout, route_with_lines)
    return _svg(list(boxes.values()), [e.view for e in links], title)


def _kernel_box(node: dict, param_lines: list[str], seconds: float | None, total: float,
                slowest: float) -> Box:
    """A kernel's box: its fused ops, the params it reads, and its time when profiled."""
    attrs = node.get("attrs") or {}
    kernel = str(attrs.get("func_name", ""))
    ops = [op for op in str(attrs.get("relay_ops", "")).split(",") if op] or [kernel]
    lines = wrap(ops)
    fill = None
    if seconds is not None:
        lines.append(f"{seconds * 1e3:.3f} ms ({seconds / (total or 1.0):.0%})")
        fill = heat(seconds / slowest if slowest else 0.0)
    return Box("kernel nop" if kernel in (NOP, CONCAT) else "kernel", lines, param_lines,
                f"{node['name']}\nkernel {kernel}", fill)


def _layout(graph, layout_class, router) -> None:
    """Sugiyama per connected component, components side by side."""
    offset = 0.0
    for component in graph.C:
        layout = layout_class(component)
        layout.xspace, layout.yspace = 30, 45
        layout.route_edge = router
        roots = [v for v in component.sV if not v.e_in()]
        layout.init_all(roots=roots, inverted_edges=[])  # a graph JSON is acyclic
        layout.draw()
        views = [v.view for v in component.sV]
        left = min(b.xy[0] - b.w / 2 for b in views)
        right = max(b.xy[0] + b.w / 2 for b in views)
        shift = offset - left
        for b in views:
            b.xy = (b.xy[0] + shift, b.xy[1])
        for e in component.sE:
            e.view.points = [(x + shift, y) for x, y in e.view.points]
        offset += right - left + 60


_STYLE = """
text { font: 12px monospace; fill: #222; }
.node rect { stroke: #333; stroke-width: 1; }
.kernel rect { fill: #eef4ff; }
.nop rect { fill: #f4f4f4; stroke-dasharray: 4 3; }
.input rect { fill: #dff5df; rx: 12; }
text.note { fill: #777; font-size: 11px; }
.output rect { fill: #fff1cc; rx: 12; }
.edge path { fill: none; stroke: #666; stroke-width: 1.2; marker-end: url(#arrow); }
.edge text { font-size: 10px; fill: #555; }
"""


def _svg(boxes: list[Box], paths: list[_Path], title: str) -> str:
    margin = 20
    xs = [b.xy[0] - b.w / 2 for b in boxes] + [b.xy[0] + b.w / 2 for b in boxes]
    ys = [b.xy[1] - b.h / 2 for b in boxes] + [b.xy[1] + b.h / 2 for b in boxes]
    top = 30 if title else 0
    dx, dy = margin - min(xs), margin + top - min(ys)
    width, height = max(xs) - min(xs) + 2 * margin, max(ys) - min(ys) + 2 * margin + top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">',
           f"<style>{_STYLE}</style>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#666"/>'
           "</marker></defs>",
           '<rect width="100%" height="100%" fill="white"/>']
    if title:
        out.append(f'<text x="{margin}" y="{margin + 8}" style="font-size:14px">'
                   f"{escape(title)}</text>")
    for p in paths:
        points = [(x + dx, y + dy) for x, y in p.points]
        d = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}"
                     for i, (x, y) in enumerate(points))
        mid = points[len(points) // 2 - 1] if len(points) > 2 else points[0]
        end = points[len(points) // 2] if len(points) > 2 else points[-1]
        lx, ly = (mid[0] + end[0]) / 2 + 4, (mid[1] + end[1]) / 2
        out.append(f'<g class="edge"><path d="{d}"/><text x="{lx:.1f}" y="{ly:.1f}">'
                   f"{escape(p.label)}</text></g>")
    for b in boxes:
        x, y = b.xy[0] + dx - b.w / 2, b.xy[1] + dy - b.h / 2
        fill = f' style="fill:{b.fill}"' if b.fill else ""
        out.append(f'<g class="node {b.kind}"><title>{escape(b.title)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}"{fill}/>')
        notes = [(line, "") for line in b.lines] + [(n, ' class="note"') for n in b.notes]
        for i, (line, cls) in enumerate(notes):
            out.append(f'<text x="{x + PAD:.1f}" y="{y + PAD + (i + 0.8) * LINE_HEIGHT:.1f}"'
                       f"{cls}>{escape(line)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
