"""relay.qnn.transform.Legalize: QNN contractions rewritten into the operand types the
target's fast int8 instructions take, as TVM's x86 QNN legalization does.

`vpdpbusd` (AVX512-VNNI / AVX-VNNI) multiplies unsigned 8-bit data by signed 8-bit weights.
On such a target, qnn.conv2d / qnn.dense / qnn.batch_matmul with int8 data get uint8 data
(x + 128, zero point + 128) and uint8 weights become int8 (w - 128, zero point - 128). Both
shifts are exact: (x + 128) - (zp + 128) = x - zp, so the results do not change. On other
targets nothing changes. relay.build does not run this pass: the strategy layer's int8
implementations ask for it where they need it.
"""
from __future__ import annotations

from compiler.ir.expr import Call, Function, Op, RelayExpr, const
from compiler.ir.traversal import rewrite_post_order
from compiler.ir.type_infer import infer_type_local
from compiler.op.registry import get_op, make_call
from compiler.target import Target, codegen_options, cpu_target
from compiler.transform import function_pass, register_pass

VNNI_FEATURES = ("avx512vnni", "avxvnni")
_CONTRACTIONS = ("qnn.conv2d", "qnn.dense", "qnn.batch_matmul")


def has_fast_int8() -> bool:
    """Whether the current target has u8 x s8 dot-product instructions."""
    target = Target.current()
    cpu = cpu_target(target) if target is not None and target.codegen is None \
        else codegen_options().cpu
    features = cpu.enabled_features()
    return any(f in features for f in VNNI_FEATURES)


def _shift(x, zero_point, to_dtype: str, delta: int) -> tuple:
    """(x + delta as to_dtype, zero_point + delta): the same centered values."""
    shifted = make_call("cast", [make_call("add", [make_call("cast", [x], dtype="int32"),
                                                   const(delta, "int32")])], dtype=to_dtype)
    return shifted, make_call("add", [zero_point, const(delta, "int32")])


def legalize_qnn(func: Function) -> Function:
    """func with its QNN contractions on uint8 data and int8 weights (func must be typed)."""
    ops = {get_op(name) for name in _CONTRACTIONS}
    func = infer_type_local(func)

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        if type(new) is not Call or type(new.op) is not Op or new.op not in ops:
            return new
        data, weight, data_zp, kernel_zp, data_scale, kernel_scale = new.args
        data_dtype = old.args[0].checked_type.dtype
        kernel_dtype = old.args[1].checked_type.dtype
        if data_dtype not in ("int8", "uint8") or kernel_dtype not in ("int8", "uint8") \
                or (data_dtype, kernel_dtype) == ("uint8", "int8"):
            return new
        if data_dtype == "int8":
            data, data_zp = _shift(data, data_zp, "uint8", 128)
        if kernel_dtype == "uint8":
            weight, kernel_zp = _shift(weight, kernel_zp, "int8", -128)
        return Call(new.op, [data, weight, data_zp, kernel_zp, data_scale, kernel_scale],
                    new.attrs, new.type_args, new.span)

    return rewrite_post_order(func, rewrite)


@register_pass(name="QnnLegalize")
def Legalize():
    """Legalize QNN contractions for the target's int8 instructions (TVM's
    relay.qnn.transform.Legalize)."""

    @function_pass(opt_level=0, name="QnnLegalize", required=["InferType"])
    def legalize(func: Function, mod, ctx) -> Function:
        return legalize_qnn(func) if has_fast_int8() else func

    return legalize
