"""ConvertLayout: convolutions into the layouts a user asks for (TVM's ConvertLayout with
desired_layouts={"nn.conv2d": ["NCHW", "default"]}), as transposes around each converted
convolution; a transpose that undoes the one before it (conv -> conv) cancels on the spot.

relayjit already runs every permutation layout through the canonical kernel, so this pass
changes what the IR says, not what runs; it does not move transposes through elementwise ops
as TVM's does. Blocked layouts (NCHW16c) are relay.build's own business and are refused here.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Function, Op, RelayExpr
from compiler.ir.traversal import rewrite_post_order
from compiler.op.conv_layout import out_layout, permutation
from compiler.transform import function_pass, register_pass

from .simplify_expr import transpose_of

# op: {data layout: its default kernel layout}
_KERNEL_FOR = {
    "nn.conv2d": {"NCHW": "OIHW", "NHWC": "HWIO"},
    "nn.conv3d": {"NCDHW": "OIDHW", "NDHWC": "DHWIO"},
}


def _desired(desired_layouts: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, str]]:
    chosen = {}
    for op, layouts in desired_layouts.items():
        if op not in _KERNEL_FOR:
            raise CompilerError(f"ConvertLayout: {op!r} is not supported; relayjit converts "
                                f"{sorted(_KERNEL_FOR)} (other ops run in any layout as given)")
        if isinstance(layouts, str) or not 1 <= len(layouts) <= 2:
            raise CompilerError(f"ConvertLayout: {op}: expected [data_layout, kernel_layout], "
                                f"got {layouts!r}")
        data = layouts[0]
        kernel = layouts[1] if len(layouts) > 1 else "default"
        if data not in _KERNEL_FOR[op]:
            raise CompilerError(f"ConvertLayout: {op} data layout {data!r}: expected one of "
                                f"{sorted(_KERNEL_FOR[op])}")
        kernel = _KERNEL_FOR[op][data] if kernel == "default" else kernel
        if sorted(kernel) != sorted(_KERNEL_FOR[op][data]):
            raise CompilerError(f"ConvertLayout: {op} kernel layout {kernel!r}: expected a "
                                f"permutation of {_KERNEL_FOR[op][data]!r} or 'default'")
        chosen[op] = (data, kernel)
    return chosen


def _converter(chosen: dict[str, tuple[str, str]]):
    def convert(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if type(new) is not Call or not isinstance(new.op, Op) or new.op.name not in chosen:
            return new
        data, kernel = chosen[new.op.name]
        attrs = new.attrs
        result = out_layout(attrs)
        if (attrs.data_layout, attrs.kernel_layout, result) == (data, kernel, data):
            return new
        x = transpose_of(new.args[0], list(permutation(attrs.data_layout, data)))
        w = transpose_of(new.args[1], list(permutation(attrs.kernel_layout, kernel)))
        conv = Call(new.op, [x, w, *new.args[2:]],
                    attrs.with_updates(data_layout=data, kernel_layout=kernel, out_layout=""))
        return transpose_of(conv, list(permutation(data, result)))
    return convert


@register_pass
def ConvertLayout(desired_layouts: Mapping[str, Sequence[str]]):
    """Convolutions into `desired_layouts` ({op: [data_layout, kernel_layout|"default"]})."""
    chosen = _desired(desired_layouts)

    @function_pass(opt_level=3, name="ConvertLayout", required=["InferType"])
    def convert_layout(func: Function, mod, ctx) -> Function:
        return rewrite_post_order(func, _converter(chosen))
    return convert_layout
