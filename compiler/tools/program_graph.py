"""Draw a fused Relay program that runs on the VM (control flow) as SVG.

A graph module has a graph JSON to draw (visualize.draw_graph); a VM program is Relay
functions with If, calls of global functions (its loops) and closures. Each global function
is drawn on its own: a box per parameter, per call of a fused primitive function (its
Relay ops; shaded by its kernel's time when given), per If (its condition comes in; the
values its branches end with go out of it), per call of a global function or closure, and
the function's result; edges follow the data (through lets, tuples and their fields),
labelled with the value's type. Recursion is a call box naming the function, not an edge.
"""
from __future__ import annotations

from collections.abc import Mapping

from compiler.ir.expr import (Call, Constant, Function, GlobalVar, If, Let, Tuple,
                              TupleGetItem, Var)
from compiler.ir.module import IRModule
from compiler.ir.traversal import post_order
from compiler.ir.types import TensorType

from .visualize import Box, heat, render, shape_text, wrap

__all__ = ["draw_program", "primitive_ops"]


def primitive_ops(func: Function) -> list[str]:
    """The Relay ops a fused primitive function calls, in execution order."""
    return [n.op.name for n in post_order(func.body)
            if isinstance(n, Call) and hasattr(n.op, "name") and not isinstance(n.op, GlobalVar)]


def draw_program(mod: IRModule, kernel_of: Mapping[Function, str] | None = None,
                 kernel_times: Mapping[str, float] | None = None, title: str = "") -> str:
    """SVG text of every global function of a fused, typed module (see the module doc);
    kernel_of names each primitive function's kernel, kernel_times gives seconds by kernel
    name (a VM profile) to shade its boxes."""
    boxes: dict = {}
    edges: list = []
    times = dict(kernel_times or {})
    total, slowest = sum(times.values()), max(times.values(), default=0.0)
    for gv, func in mod.functions.items():
        _Drawing(gv.name_hint, func, boxes, edges, kernel_of or {}, times, total,
                 slowest).run()
    return render(boxes, edges, title)


class _Drawing:
    """The boxes and edges of one global function."""

    def __init__(self, name: str, func: Function, boxes: dict, edges: list,
                 kernel_of: Mapping, times: dict, total: float, slowest: float) -> None:
        self.name, self.func, self.boxes, self.edges = name, func, boxes, edges
        self.kernel_of, self.times, self.total, self.slowest = kernel_of, times, total, slowest
        self.sources: dict = {}  # node -> the box keys its value comes from

    def box(self, node, box: Box) -> tuple:
        key = (self.name, len(self.boxes))
        self.boxes[key] = box
        self.sources[node] = [key]
        return key

    def feed(self, node, into: tuple) -> None:
        label = _type_text(node)
        for src in self.sources.get(node, ()):
            self.edges.append((src, into, label))

    def run(self) -> None:
        for p in self.func.params:
            self.box(p, Box("input", [f"@{self.name} %{p.name_hint}", _type_text(p)], [],
                            f"parameter {p.name_hint} of @{self.name}"))
        inside = lambda n: not (isinstance(n, Function) and n.is_primitive)  # noqa: E731
        for node in post_order(self.func.body, expand=inside):
            self.visit(node)
        out = self.box(("result", self.name), Box("output", [f"@{self.name} result"], [],
                                                  f"result of @{self.name}"))
        self.feed(self.func.body, out)

    def visit(self, node) -> None:
        t = type(node)
        if t is Call:
            self.call(node)
        elif t is If:
            key = self.box(node, Box("kernel nop", ["if"], [], "If"))
            self.feed(node.cond, key)
            for branch in (node.true_branch, node.false_branch):
                self.feed(branch, key)
        elif t is Let:
            self.sources[node.var] = self.sources.get(node.value, [])
            self.sources[node] = self.sources.get(node.body, [])
        elif t is Tuple:
            self.sources[node] = [k for f in node.fields for k in self.sources.get(f, ())]
        elif t is TupleGetItem:
            inner = node.tuple_value
            self.sources[node] = (self.sources.get(inner.fields[node.index], [])
                                  if type(inner) is Tuple else self.sources.get(inner, []))
        elif t is Function and node is not self.func and not node.is_primitive:
            self.box(node, Box("kernel nop", ["closure"], [], "a closure"))

    def call(self, node: Call) -> None:
        op = node.op
        if isinstance(op, Function) and op.is_primitive:
            kernel = self.kernel_of.get(op, "")
            seconds = self.times.get(kernel)
            lines = wrap(primitive_ops(op)) or [kernel]
            fill = None
            if seconds is not None:
                lines.append(f"{seconds * 1e3:.3f} ms ({seconds / (self.total or 1.0):.0%})")
                fill = heat(seconds / self.slowest if self.slowest else 0.0)
            notes = [f"const {shape_text(a.data.shape)}" for a in node.args
                     if isinstance(a, Constant)]
            key = self.box(node, Box("kernel", lines, notes, f"kernel {kernel}", fill))
        elif isinstance(op, GlobalVar):
            key = self.box(node, Box("kernel nop", [f"call @{op.name_hint}"], [],
                                     f"call of @{op.name_hint}"))
        elif isinstance(op, Var):
            key = self.box(node, Box("kernel nop", [f"call %{op.name_hint}"], [],
                                     f"call of the closure %{op.name_hint}"))
        elif hasattr(op, "name"):  # an op outside any fused function (shape_of, ...)
            key = self.box(node, Box("kernel", [op.name], [], op.name))
        else:
            key = self.box(node, Box("kernel nop", ["call"], [], "call"))
            self.feed(op, key)
        for a in node.args:
            self.feed(a, key)


def _type_text(node) -> str:
    ty = getattr(node, "_checked_type", None) or getattr(node, "type_annotation", None)
    return shape_text(ty.shape) if isinstance(ty, TensorType) else ""
