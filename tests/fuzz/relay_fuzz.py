"""Random Relay programs under random pass pipelines (runs inside the worker).

A program is a chain of 1-12 steps over one or two float32 inputs, built with the relay
API: elementwise and broadcast math (with scalar, per-channel and full-tensor operands,
constant-only subexpressions for FoldConstant, duplicated calls for CSE), reductions with
axis/keepdims/exclude, conv2d (groups, strides, dilation, padding) with bias_add /
batch_norm / per-channel scales (SimplifyInference, FoldScaleAxis, AlterOpLayout), pools,
dense, softmax, transpose / reshape / concatenate / strided_slice. Weights are constants or
params bound at build time.

The expected value is the unoptimised program on the debug interpreter (numpy references).
A random pipeline drawn from InferType, FoldConstant, EliminateCommonSubexpr, FuseOps,
SimplifyInference, FoldScaleAxis, AlterOpLayout, DeadCodeElimination, ToANormalForm runs
through compiler.transform.Sequential; the result must be well formed, must interpret to
the same values, and relay.build of it (at a random opt_level) must run to the same values.

Steps draw from their own generator, the pipeline from another, so a shrinker can cut a
program to its first k steps or drop passes without changing the rest.
"""
from __future__ import annotations

import math
import time

import numpy as np

PASSES = ["InferType", "FoldConstant", "EliminateCommonSubexpr", "FuseOps",
          "SimplifyInference", "FoldScaleAxis", "AlterOpLayout", "DeadCodeElimination",
          "ToANormalForm"]


class _Prog:
    """The program under construction: current expression, its shape, and the accumulated
    reduction length (which scales the comparison tolerance)."""

    def __init__(self, rng: np.random.Generator):
        from compiler import relay
        self.relay = relay
        self.rng = rng
        self.params: dict = {}
        self.args: dict = {}
        self.vars: list = []
        self.acc = 1.0

    def var(self, shape: tuple, data=None):
        name = f"x{len(self.vars)}"
        v = self.relay.var(name, shape=shape, dtype="float32")
        self.vars.append(v)
        self.args[name] = (self.rng.uniform(-2, 2, shape) if data is None else data).astype(
            "float32")
        return v

    def weight(self, shape: tuple, lo: float = -1.0, hi: float = 1.0):
        """A constant, or (half the time) a param var bound at build time."""
        value = self.rng.uniform(lo, hi, shape).astype("float32")
        if self.rng.random() < 0.5:
            return self.relay.const(value)
        name = f"p{len(self.params)}"
        self.params[name] = value
        v = self.relay.var(name, shape=shape, dtype="float32")
        self.vars.append(v)
        return v

    def shape(self, expr) -> tuple:
        from compiler.ir.type_infer import InferTypeLocal
        return tuple(int(d) for d in InferTypeLocal(expr).shape)

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]


def _step(p: _Prog, x):
    """One random step applied to x (returns the new expression)."""
    relay, rng = p.relay, p.rng
    shape = p.shape(x)
    r = rng.random()
    if len(shape) == 4 and r < 0.3:
        return _conv_block(p, x, shape)
    if len(shape) == 4 and r < 0.38:
        size = int(p.choice([2, 3]))
        if min(shape[2:]) < size:
            return relay.nn.relu(x)
        pool = p.choice([relay.nn.max_pool2d, relay.nn.avg_pool2d])
        return pool(x, pool_size=(size, size), strides=(int(p.choice([1, 2])),) * 2,
                    padding=(int(rng.integers(0, size)),) * 2)
    if len(shape) == 2 and r < 0.25:
        units = int(p.choice([4, 8, 16, 17]))
        p.acc += shape[1]
        y = relay.nn.dense(x, p.weight((units, shape[1])))
        return relay.nn.bias_add(y, p.weight((units,))) if rng.random() < 0.6 else y
    if r < 0.5:
        return _elementwise(p, x, shape)
    if r < 0.6 and len(shape) >= 2:
        axis = int(rng.integers(len(shape)))
        keep = bool(rng.random() < 0.5)
        op = p.choice([relay.sum, relay.mean, relay.max, relay.min])
        if op in (relay.sum,):
            p.acc += shape[axis]
        return op(x, axis=[axis - len(shape) if rng.random() < 0.5 else axis], keepdims=keep,
                  exclude=bool(rng.random() < 0.15) and len(shape) > 2)
    if r < 0.68:
        return relay.nn.softmax(x, axis=int(rng.integers(-len(shape), len(shape))))
    if r < 0.76 and len(shape) >= 2:
        perm = [int(a) for a in rng.permutation(len(shape))]
        return relay.transpose(x, axes=perm)
    if r < 0.84:
        if len(shape) == 4 and rng.random() < 0.5:
            return relay.nn.batch_flatten(x)
        size = math.prod(shape)
        return relay.reshape(x, newshape=(-1,) if rng.random() < 0.3 else (1, size))
    if r < 0.92 and len(shape) >= 1:
        axis = int(rng.integers(len(shape)))
        return relay.concatenate([x, relay.negative(x)], axis=axis)
    if len(shape) >= 1 and shape[-1] >= 2:
        begin = [0] * (len(shape) - 1) + [1]
        return relay.strided_slice(x, begin=begin, end=list(shape))
    return relay.nn.relu(x)


def _elementwise(p: _Prog, x, shape: tuple):
    relay, rng = p.relay, p.rng
    r = rng.random()
    if r < 0.3:
        op = p.choice([relay.nn.relu, relay.sigmoid, relay.tanh, relay.negative, relay.abs,
                       lambda e: relay.sqrt(relay.abs(e) + relay.const(1.0))])
        return op(x)
    op = p.choice([relay.add, relay.multiply, relay.subtract, relay.maximum, relay.minimum])
    if r < 0.5:
        other = relay.const(float(p.choice([0.5, 2.0, -1.0, 1.5])))
    elif r < 0.65 and len(shape) == 4:
        other = p.weight((shape[1], 1, 1), 0.5, 1.5)  # per-channel: FoldScaleAxis's pattern
    elif r < 0.75:
        # a constant-only subexpression for FoldConstant
        a, b = relay.const(p.rng.uniform(-1, 1, shape[-1:]).astype("float32")), \
            relay.const(float(p.choice([2.0, 0.5])))
        other = relay.multiply(relay.add(a, b), b)
    elif r < 0.85:
        # the same call written twice, for EliminateCommonSubexpr
        return relay.add(relay.tanh(x), relay.tanh(x))
    else:
        other = p.var(shape)
    return op(x, other) if rng.random() < 0.7 else op(other, x)


def _conv_block(p: _Prog, x, shape: tuple):
    relay, rng = p.relay, p.rng
    n, c, h, w = shape
    groups = int(p.choice([g for g in (1, 1, 2, c) if c % g == 0]))
    out = int(groups * p.choice([1, 2, 4] if groups > 1 else [4, 8, 16]))
    k = int(p.choice([1, 3, 3, 5]))
    stride = int(p.choice([1, 1, 2]))
    dil = int(p.choice([1, 1, 2]))
    pad = int(rng.integers(0, k))
    if (k - 1) * dil + 1 > min(h, w) + 2 * pad:
        return relay.nn.relu(x)
    p.acc += c // groups * k * k
    y = relay.nn.conv2d(x, p.weight((out, c // groups, k, k)), strides=(stride, stride),
                        padding=(pad, pad), dilation=(dil, dil), groups=groups, channels=out,
                        kernel_size=(k, k))
    if rng.random() < 0.4:
        y = relay.multiply(y, p.weight((out, 1, 1), 0.5, 1.5))
    if rng.random() < 0.5:
        y = relay.nn.bias_add(y, p.weight((out,)))
    if rng.random() < 0.3:
        y = relay.nn.batch_norm(y, p.weight((out,)), p.weight((out,)), p.weight((out,)),
                                p.weight((out,), 0.5, 2.0))[0]
    if rng.random() < 0.6:
        y = relay.nn.relu(y)
    return y


def build_program(seed: int, steps: int | None = None):
    """(function, argument arrays by name, params, number of steps) for the seed."""
    rng = np.random.default_rng([seed, 1])
    p = _Prog(rng)
    relay = p.relay
    if rng.random() < 0.6:
        shape = (int(p.choice([1, 1, 2])), int(p.choice([3, 4, 8, 16])),
                 int(rng.integers(5, 17)), int(rng.integers(5, 17)))
    else:
        shape = (int(p.choice([1, 2, 4, 7])), int(p.choice([8, 16, 33])))
    x = p.var(shape)
    total = int(rng.integers(1, 13))
    steps = total if steps is None else min(steps, total)
    for _ in range(steps):
        x = _step(p, x)
    free = relay.analysis.free_vars(x)
    ordered = [v for v in p.vars if any(v is f for f in free)]
    return relay.Function(ordered, x), p, total


def pipeline_for(seed: int) -> list:
    rng = np.random.default_rng([seed, 2])
    count = int(rng.integers(1, 8))
    return [PASSES[int(i)] for i in rng.integers(0, len(PASSES), count)]


def run_relay_case(seed: int, steps: int | None = None, pipeline: list | None = None,
                   level: int | None = None) -> dict:
    """Build, transform, interpret and compile one program; the verdict as oracle.evaluate's."""
    import compiler as tvm
    import runtime
    from compiler import relay
    from compiler.op.interpreter import evaluate
    from runtime import graph_executor

    from .oracle import CRASH, MISMATCH, PASS, classify_error, describe_error

    start = time.perf_counter()
    pipeline = pipeline_for(seed) if pipeline is None else list(pipeline)
    level = int(np.random.default_rng([seed, 3]).integers(0, 4)) if level is None else level
    info = {"seed": seed, "steps": steps, "pipeline": pipeline, "build_opt_level": level}
    stage = "build program"
    try:
        func, prog, total = build_program(seed, steps)
        info.update(steps=min(steps or total, total), total_steps=total)
        mod = tvm.IRModule.from_expr(func)
        info["program"] = str(mod)[:4000]
        values = {**prog.args, **prog.params}
        args = [values[v.name_hint] for v in func.params]
        stage = "interpret the unoptimised program"
        want = np.asarray(evaluate(mod, args))
        stage = f"run the pipeline {pipeline}"
        with tvm.transform.PassContext(opt_level=3):
            passes = [getattr(relay.transform, name)() for name in pipeline]
            opt = tvm.transform.Sequential(passes)(mod)
        stage = "well_formed after the pipeline"
        if not relay.analysis.well_formed(opt["main"]):
            return {**info, "status": MISMATCH, "detail": "pipeline output is not well formed",
                    "time": time.perf_counter() - start}
        tol = 1e-5 + 1e-6 * prog.acc * max(1.0, float(np.nanmax(np.abs(want))) if want.size
                                          else 1.0)
        stage = "interpret the optimised program"
        got = np.asarray(evaluate(opt, [values[v.name_hint] for v in opt["main"].params]))
        problem = _compare(want, got, tol)
        if problem:
            return {**info, "status": MISMATCH, "detail": f"interpreter after pipeline: {problem}",
                    "time": time.perf_counter() - start}
        stage = f"relay.build at opt_level {level}"
        with tvm.transform.PassContext(opt_level=level):
            lib = relay.build(opt, target="llvm", params=prog.params)
        module = graph_executor.GraphModule(lib["default"](runtime.cpu()))
        stage = "run the built module"
        module.set_input(**prog.args)
        module.run()
        problem = _compare(want, module.get_output(0).numpy(), tol)
        if problem:
            return {**info, "status": MISMATCH, "detail": f"built module: {problem}",
                    "time": time.perf_counter() - start}
    except Exception as err:  # noqa: BLE001 - classified
        status = classify_error(err)
        if stage in ("build program", "interpret the unoptimised program") and status != PASS:
            status = "invalid" if status != CRASH else CRASH
        return {**info, "status": status, "detail": f"{stage}: {describe_error(err)}",
                "error_type": type(err).__name__, "time": time.perf_counter() - start}
    return {**info, "status": PASS, "detail": "", "time": time.perf_counter() - start}


def _compare(want: np.ndarray, got: np.ndarray, tol: float) -> str:
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"got {got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
    diff = np.abs(want.astype(np.float64) - got.astype(np.float64))
    bad = ~(diff <= tol + 1e-4 * np.abs(want)) & ~(np.isnan(want) & np.isnan(got))
    if not bad.any():
        return ""
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())}/{bad.size} elements differ; first at {list(first)}: got "
            f"{got[first]!r}, expected {want[first]!r}; max abs diff {np.nanmax(diff):.3g} "
            f"(atol {tol:.3g})")
