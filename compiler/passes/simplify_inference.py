"""SimplifyInference: rewrite training-time ops into their inference arithmetic, as TVM's
simplify_inference.cc.

One bottom-up walk (rewrite_post_order, explicit stack) over the function:
- `nn.batch_norm(x, gamma, beta, mean, var)[0]` becomes `x * scale + shift` with
      scale = 1 / sqrt(var + eps)  (times gamma if `scale`)
      shift = -mean * scale        (plus beta if `center`)
  both expanded with expand_dims(axis=1, num_newaxis=ndim - axis - 1) so they broadcast along
  `axis` (TVM's ExpandBiasToMatchAxis). Other outputs ([1], [2]) keep the original call.
- `nn.dropout(x)[0]` becomes x.
- `nn.layer_norm` / `nn.instance_norm` / `nn.group_norm` become mean/variance arithmetic
  `(x - mean) / sqrt(var + eps)` (group norm through a reshape to (.., groups, C/groups, ..)),
  then `* gamma` / `+ beta` expanded along `axis`; `nn.l2_normalize` (when registered) becomes
  `x / sqrt(max(sum(x * x), eps))`.
Ranks come from the data argument's checked_type, so InferType must have run (it is required).
"""
from __future__ import annotations

from compiler.errors import CompilerError
from compiler.ir.expr import Call, Function, Op, RelayExpr, TupleGetItem, const
from compiler.ir.traversal import rewrite_post_order
from compiler.ir.types import TensorType
from compiler.op import reduce
from compiler.op.registry import get_def
from compiler.op.tensor import maximum, sqrt
from compiler.op.transform import expand_dims, reshape
from compiler.transform import function_pass, register_pass


def _op(name: str) -> Op | None:
    try:
        return get_def(name).op
    except CompilerError:
        return None


def _tensor_type(op: str, data: RelayExpr) -> TensorType:
    ty = data.checked_type
    if not isinstance(ty, TensorType):
        raise CompilerError(f"SimplifyInference > {op}: expected the data to be a tensor, got "
                            f"{ty}")
    return ty


def _expand_to_axis(bias: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """TVM's ExpandBiasToMatchAxis for one axis: append ndim - axis - 1 unit dims."""
    pad = ndim - axis - 1
    if pad > 0:
        return expand_dims(bias, axis=1, num_newaxis=pad)
    return bias


def _norm_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def _variance(data: RelayExpr, mean: RelayExpr, axes: list) -> RelayExpr:
    """Biased variance around the already computed mean (shared, as TVM's Variance(data, mean))."""
    return reduce.variance(data, axis=axes, keepdims=True, exclude=False, unbiased=False,
                           with_mean=mean)


def _standardise(data: RelayExpr, axes: list, eps: RelayExpr) -> RelayExpr:
    mean = reduce.mean(data, axis=axes, keepdims=True)
    var = _variance(data, mean, axes)
    return (data - mean) / sqrt(var + eps)


def _affine(out: RelayExpr, gamma, beta, attrs, ndim: int, axis: int) -> RelayExpr:
    if attrs.scale:
        out = out * _expand_to_axis(gamma, ndim, axis)
    if attrs.center:
        out = out + _expand_to_axis(beta, ndim, axis)
    return out


def batch_norm_to_inference(call: Call, data_type: TensorType) -> RelayExpr:
    """nn.batch_norm(...)[0] as x * scale + shift."""
    data, gamma, beta, mean, var = call.args
    attrs = call.attrs
    eps = const(float(attrs.epsilon), data_type.dtype)
    scale = const(1.0, data_type.dtype) / sqrt(var + eps)
    if attrs.scale:
        scale = scale * gamma
    shift = -mean * scale
    if attrs.center:
        shift = shift + beta
    ndim = data_type.ndim
    axis = _norm_axis(attrs.axis, ndim)
    scale = _expand_to_axis(scale, ndim, axis)
    shift = _expand_to_axis(shift, ndim, axis)
    return data * scale + shift


def layer_norm_to_inference(call: Call, data_type: TensorType) -> RelayExpr:
    data, gamma, beta = call.args
    attrs = call.attrs
    eps = const(float(attrs.epsilon), data_type.dtype)
    out = _standardise(data, [attrs.axis], eps)
    ndim = data_type.ndim
    return _affine(out, gamma, beta, attrs, ndim, _norm_axis(attrs.axis, ndim))


def instance_norm_to_inference(call: Call, data_type: TensorType) -> RelayExpr:
    data, gamma, beta = call.args
    attrs = call.attrs
    ndim = data_type.ndim
    axis = _norm_axis(attrs.axis, ndim)
    axes = [i for i in range(1, ndim) if i != axis]
    eps = const(float(attrs.epsilon), "float32")  # TVM builds this one in float32 always
    out = _standardise(data, axes, eps)
    return _affine(out, gamma, beta, attrs, ndim, axis)


def group_norm_to_inference(call: Call, data_type: TensorType) -> RelayExpr:
    data, gamma, beta = call.args
    attrs = call.attrs
    shape = data_type.shape
    ndim = len(shape)
    axis = _norm_axis(attrs.axis, ndim)
    groups = attrs.num_groups
    grouped = list(shape[:axis]) + [groups, shape[axis] // groups] + list(shape[axis + 1:])
    axes = list(range(axis + 1, ndim + 1))
    eps = const(float(attrs.epsilon), data_type.dtype)
    out = _standardise(reshape(data, grouped), axes, eps)
    out = reshape(out, list(shape))
    return _affine(out, gamma, beta, attrs, ndim, axis)


def l2_normalize_to_inference(call: Call, data_type: TensorType) -> RelayExpr:
    (data,) = call.args
    eps = const(float(call.attrs.eps), "float32")
    total = maximum(reduce.sum(data * data, axis=call.attrs.axis, keepdims=True), eps)
    return data / sqrt(total)


_CALL_RULES = {
    "nn.layer_norm": layer_norm_to_inference,
    "nn.instance_norm": instance_norm_to_inference,
    "nn.group_norm": group_norm_to_inference,
    "nn.l2_normalize": l2_normalize_to_inference,
}


def simplify_inference(expr: RelayExpr) -> RelayExpr:
    """Apply the rewrites to one (type-checked) expression."""
    batch_norm, dropout = _op("nn.batch_norm"), _op("nn.dropout")
    rules = {op: rule for name, rule in _CALL_RULES.items() if (op := _op(name)) is not None}

    def rewrite(old: RelayExpr, new: RelayExpr) -> RelayExpr:
        kind = type(new)
        if kind is TupleGetItem and new.index == 0 and type(new.tuple_value) is Call:
            call = new.tuple_value
            if call.op is batch_norm and batch_norm is not None:
                typed = old.tuple_value if type(old.tuple_value) is Call else call
                data_type = _tensor_type("nn.batch_norm", typed.args[0])
                return batch_norm_to_inference(call, data_type)
            if call.op is dropout and dropout is not None:
                return call.args[0]
        elif kind is Call and new.op in rules:
            return rules[new.op](new, _tensor_type(new.op.name, old.args[0]))
        return new

    return rewrite_post_order(expr, rewrite)


@register_pass
def SimplifyInference():
    """Replace batch_norm, dropout and the other normalisations by inference arithmetic."""

    @function_pass(opt_level=0, name="SimplifyInference", required=["InferType"])
    def simplify_inference_pass(func: Function, mod, ctx) -> Function:
        return simplify_inference(func)

    return simplify_inference_pass
