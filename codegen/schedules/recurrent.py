"""One direction of a recurrent layer (RNN / GRU / LSTM) as one kernel that loops over time.

The input projection of every step (X W^T + Wb) is a GEMM outside, done once for all steps;
this kernel does what is left, in order, with no kernel launch per step:

    state h, c = h0, c0
    for each step t (reversed for the backward direction):
      acc[b, gate panels] = h[b] . Rp        GEMV micro-kernel calls over the packed weight
                                             (groups of panels; on the threads the step's
                                             work pays for: ParallelPolicy), every other
                                             step backwards (each thread's panels), so a
                                             step starts on what the last one left in cache
      (GRU without linear_before_reset: z and r first, then (r * h) . Rp_h)
      for j (vectorised): the gate math fused: xw[t, b] + acc + Rb, clip, activations,
                                             new h and c into the state and Y[t, b]
    Y_h, Y_c = h, c (zeros for a batch entry of length 0)

The weight is read packed (nn.contrib_recurrent_weight_pack: each gate in panels of
tile_columns columns, [G * ceil(H / tile_columns), H, tile_columns]); a weight that is not a
constant is packed into scratch at the start of each call. The result is one buffer
[T + 2, B, H]: Y, then Y_h, then Y_c (codegen.te's externs write one buffer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import te
from ..llvm.microkernels.descriptors import Gemv
from ..options import CodegenOptions
from ..parallel import ParallelPolicy, parallel_loop
from ..tir.expr import Expr, Load, Var
from ..tir.ops import cast, const, eq, floormod, if_then_else, lt, max as tmax, min as tmin
from ..tir.ops import select
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, Stmt, Store, seq
from .common import F32, I64, addr, ceil_div, imm, ukr_call, var, zero
from .config import ScheduleConfig, pick

__all__ = ["RecurrentConfig", "RecurrentLayer", "resolve_recurrent", "recurrent_layer",
           "recurrent_panels"]

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


@dataclass(frozen=True)
class RecurrentConfig(ScheduleConfig):
    """The recurrent layer's GEMV: panel width and panels per micro-kernel call. (A step's
    product splits over the threads the build's ParallelPolicy finds its work pays for.)"""

    vector_width: int | None = None
    tile_columns: int | None = None      # columns of a packed panel (whole vectors)
    panels: int | None = None            # panels one micro-kernel call computes
    alternate: bool | None = None        # every other step walks the panels backwards


def resolve_recurrent(hidden: int, options: CodegenOptions,
                      given: RecurrentConfig | None = None) -> RecurrentConfig:
    """Panels of two vectors (one when the hidden size is at most a vector), two panels a
    call (the dense GEMV's choice on AVX-512; one on AVX2, whose 16 registers hold one)."""
    c = given or RecurrentConfig()
    vw = pick(c.vector_width, lambda: options.vector_width)
    cols = pick(c.tile_columns, lambda: vw if hidden <= vw else 2 * vw)
    if cols % vw or cols < vw:
        raise ValueError(f"RecurrentConfig: tile_columns {cols} is not whole vectors of {vw}")
    return RecurrentConfig(vw, cols, pick(c.panels, lambda: 2 if vw == 16 else 1),
                           pick(c.alternate, lambda: True))


def recurrent_panels(gates: int, hidden: int, block: int) -> tuple[int, int, int]:
    """The packed weight's shape: [gates * ceil(hidden / block), hidden, block]."""
    return gates * ceil_div(hidden, block), hidden, block


@dataclass(frozen=True)
class RecurrentLayer:
    """What the kernel computes: mode, shapes, and the gate math's parameters. acts[i](x) is
    activation function i as a tir expression (the op's table), clip None for none."""

    mode: str
    steps: int
    batch: int
    hidden: int
    reverse: bool
    acts: tuple
    clip: float | None = None
    linear_before_reset: bool = False
    input_forget: bool = False


def recurrent_layer(xw: te.Tensor, r: te.Tensor, h0: te.Tensor, c0: te.Tensor,
                    rbias: te.Tensor, peep: te.Tensor, lens: te.Tensor, layer: RecurrentLayer,
                    block: int = 0, *, options: CodegenOptions | None = None,
                    config: RecurrentConfig | None = None,
                    name: str = "T_recurrent") -> te.Tensor:
    """The [T + 2, B, H] buffer of Y, Y_h and Y_c (module docstring). block: r is packed in
    panels of that many columns (0: r is [G*H, H]). With options (and vectors) the products
    are GEMV micro-kernel calls in config's panels (a block given must be its tile_columns);
    without (the op's generic compute rule) plain scalar loops over r as it is."""
    t_len, b_len, h = layer.steps, layer.batch, layer.hidden
    g = GATES[layer.mode]
    if block and tuple(r.shape) != recurrent_panels(g, h, block):
        raise ValueError(f"{name}: packed weight {tuple(r.shape)}, expected "
                         f"{recurrent_panels(g, h, block)} for {layer.mode} H={h} in panels "
                         f"of {block}")
    fast = options is not None and options.vectorize
    if fast:
        config = resolve_recurrent(h, options, config)
        if block and block != config.tile_columns:
            raise ValueError(f"{name}: the weight is packed in panels of {block} columns, the "
                             f"configuration reads {config.tile_columns}")

    def fcompute(ins, outs):
        return _Kernel(layer, config if fast else None, options.parallel if fast else None,
                       name, ins, outs[0], block).stmt()

    attrs = {"prefer_vector_width": 32 * config.vector_width} if fast else None
    return te.extern((t_len + 2, b_len, h), [xw, r, h0, c0, rbias, peep, lens], fcompute,
                     name=name, kernel_attrs=attrs)


class _Kernel:
    """The TIR of one recurrent_layer (see the module docstring)."""

    def __init__(self, layer: RecurrentLayer, config: RecurrentConfig | None,
                 parallel: ParallelPolicy | None, name: str, ins: list, out: Buffer,
                 block: int):
        """block: r is packed in panels that wide (0: plain). config None: scalar loops over
        r as it comes (a plain r is one panel of H columns a gate)."""
        self.layer, self.config, self.parallel, self.name = layer, config, parallel, name
        self.xw, r, self.h0, self.c0, self.rb, self.peep, self.lens = ins
        self.out = out
        h = layer.hidden
        self.blk = config.tile_columns if config is not None else (block or h)
        self.nt = ceil_div(h, self.blk)  # panels a gate
        self.gates = GATES[layer.mode]
        panels = self.gates * self.nt
        # the fast path packs a plain weight into scratch once a call
        self.plain_r = r if config is not None and not block else None
        self.rp = Buffer(f"{name}_rpack", (panels, h, self.blk), F32) \
            if self.plain_r is not None else r
        self.acc = Buffer(f"{name}_acc", (layer.batch, panels * self.blk), F32)
        self.hs = Buffer(f"{name}_h", (layer.batch, h), F32)
        self.cs = Buffer(f"{name}_c", (layer.batch, h), F32)
        self.rh = Buffer(f"{name}_rh", (layer.batch, h), F32)
        self.vec = "vectorized" if config is not None else "serial"
        self.step = var(f"{name}_s")  # the time loop's counter

    def weight(self, p: Expr, k: Expr, v: Expr) -> Expr:
        """Rp[p, k, v] of the (packed or plain) weight the products read."""
        if len(self.rp.shape) == 3:
            return Load(self.rp, (p, k, v), F32)
        return Load(self.rp, (p * self.layer.hidden + v, k), F32)  # one panel a gate

    # ---- pieces
    def pack(self) -> Stmt:
        """Rp[p, k, v] = R[gate*H + col, k], zero past H (a weight that is not constant)."""
        if self.plain_r is None:
            return seq()
        h, blk = self.layer.hidden, self.blk
        p, k, v = var(f"{self.name}_pp"), var(f"{self.name}_pk"), var(f"{self.name}_pv")
        col = (p % self.nt) * blk + v
        row = (p // self.nt) * h + tmin(col, imm(h - 1))
        val = Load(self.plain_r, (row, k), F32)
        if self.nt * blk != h:
            val = if_then_else(lt(col, h), val, zero())
        return For(p, self.gates * self.nt, For(k, h, For(v, blk, Store(
            self.rp, (p, k, v), val), self.vec)))

    def product(self, x: Buffer, first: int, count: int) -> Stmt:
        """acc[b, panels first..first+count) = x[b] . Rp[those panels], every row b."""
        h, blk, b_len = self.layer.hidden, self.blk, self.layer.batch
        b = var(f"{self.name}_gb{first}")
        if self.config is None:
            p, k, v = (var(f"{self.name}_g{c}{first}") for c in "pkv")
            dst = (b, (p + first) * blk + v)
            body = seq(Store(self.acc, dst, zero()), For(k, h, Store(
                self.acc, dst, Load(self.acc, dst, F32)
                + Load(x, (b, k), F32) * self.weight(p + first, k, v))))
            return For(b, b_len, For(p, count, For(v, blk, body)))
        vw, group = self.config.vector_width, min(self.config.panels, count)
        groups = ceil_div(count, group)
        last = count - (groups - 1) * group
        q = var(f"{self.name}_gq{first}")
        threads = self.parallel.threads(2 * b_len * count * blk * h, 4 * count * blk * h)
        # every other step walks each thread's panels backwards, starting with those it read
        # last, still in its cache (a weight larger than the cache otherwise misses
        # throughout: streamed in one order, each panel evicts the next one needed). The
        # threads' ranges are the pool's chunks for the thread count the build is for.
        tasks = max(1, min(self.parallel.pool_threads, threads, groups))
        chunk = ((q + 1) * tasks - 1) // groups
        lo, hi = chunk * groups // tasks, (chunk + 1) * groups // tasks
        qq = q if groups < 2 or not self.config.alternate else select(
            eq(floormod(self.step, 2), 1), lo + hi - 1 - q, q)
        p0 = qq * group + first

        def call(panels: int) -> Stmt:
            return ukr_call(Gemv(blk, vw, panels), h, addr(x, b, 0), addr(self.rp, p0, 0, 0),
                            addr(self.acc, b, p0 * blk), h * blk)
        body = call(group) if last == group else IfThenElse(lt(qq, groups - 1), call(group),
                                                             call(last))
        # one parallel region a step: on the threads its product's work pays for
        return parallel_loop(q, groups, For(b, b_len, body), threads)

    def gate(self, t: Expr, b: Var, j: Var, k: int) -> Expr:
        """Gate k's pre-activation without the recurrent part of GRU's h gate: xw + acc + Rb
        (the recurrent product of a GRU's h gate without linear_before_reset is added by the
        caller)."""
        h, cols = self.layer.hidden, self.nt * self.blk
        return (Load(self.xw, (t, b, j + k * h), F32) + Load(self.acc, (b, j + k * cols), F32)
                + Load(self.rb, (j + k * h,), F32))

    def act(self, i: int, x: Expr, clipped: bool = True) -> Expr:
        clip = self.layer.clip
        if clip is not None and clipped:
            x = tmin(tmax(x, const(-clip, F32)), const(clip, F32))
        return self.layer.acts[i](x)

    def cell(self, t: Expr, b: Var, j: Var, store: Callable[[Expr, Expr | None], Stmt]
             ) -> Stmt:
        """The fused gate math of row b, column j: store(new h, new c or None)."""
        mode, n = self.layer.mode, self.name
        h_old = Load(self.hs, (b, j), F32)
        if mode == "RNN":
            return store(self.act(0, self.gate(t, b, j, 0)), None)
        if mode == "GRU":
            z = self.act(0, self.gate(t, b, j, 0))
            if self.layer.linear_before_reset:
                rt = self.act(0, self.gate(t, b, j, 1))
                cols, hid = self.nt * self.blk, self.layer.hidden
                pre = Load(self.xw, (t, b, j + 2 * hid), F32) + rt * (
                    Load(self.acc, (b, j + 2 * cols), F32) + Load(self.rb, (j + 2 * hid,), F32))
            else:  # acc's h gate already holds (r * h) . Rh
                pre = self.gate(t, b, j, 2)
            zv = Var(f"{n}_z", F32)
            new_h = (const(1.0, F32) - zv) * self.act(1, pre) + zv * h_old
            return LetStmt(zv, z, store(new_h, None))
        c_old = Load(self.cs, (b, j), F32)
        hid = self.layer.hidden
        peep = lambda k: Load(self.peep, (j + k * hid,), F32)  # noqa: E731
        iv, cv = Var(f"{n}_i", F32), Var(f"{n}_cn", F32)
        it = self.act(0, self.gate(t, b, j, 0) + peep(0) * c_old)
        ft = const(1.0, F32) - iv if self.layer.input_forget else \
            self.act(0, self.gate(t, b, j, 2) + peep(2) * c_old)
        ct = ft * c_old + iv * self.act(1, self.gate(t, b, j, 3))
        ot = self.act(0, self.gate(t, b, j, 1) + peep(1) * cv)
        return LetStmt(iv, it, LetStmt(cv, ct, store(ot * self.act(2, cv, False), cv)))

    def stmt(self) -> Stmt:
        layer, n = self.layer, self.name
        t_len, b_len, h = layer.steps, layer.batch, layer.hidden
        s, b, j = self.step, var(f"{n}_b"), var(f"{n}_j")
        t = var(f"{n}_t")
        init = For(b, b_len, For(j, h, seq(
            Store(self.hs, (b, j), Load(self.h0, (b, j), F32)),
            Store(self.cs, (b, j), Load(self.c0, (b, j), F32))), self.vec))
        if layer.mode == "GRU" and not layer.linear_before_reset:
            rgate = self.act(0, self.gate(t, b, j, 1)) * Load(self.hs, (b, j), F32)
            products = seq(self.product(self.hs, 0, 2 * self.nt),
                           For(b, b_len, For(j, h, Store(self.rh, (b, j), rgate), self.vec)),
                           self.product(self.rh, 2 * self.nt, self.nt))
        else:
            products = self.product(self.hs, 0, self.gates * self.nt)
        hv = Var(f"{n}_hn", F32)

        def store(new_h: Expr, new_c: Expr | None) -> Stmt:
            return LetStmt(hv, new_h, seq(
                Store(self.out, (t, b, j), hv), Store(self.hs, (b, j), hv),
                Store(self.cs, (b, j), new_c) if new_c is not None else None))
        running = lt(t, cast(Load(self.lens, (b,), "int32"), I64))
        cells = For(b, b_len, IfThenElse(
            running, For(j, h, self.cell(t, b, j, store), self.vec),
            For(j, h, Store(self.out, (t, b, j), zero()), self.vec)))
        step = LetStmt(t, imm(t_len - 1) - s if layer.reverse else s, seq(products, cells))
        # an entry of length 0 ends in zeros, as onnxruntime's (not its initial state)
        ran = lt(imm(0), cast(Load(self.lens, (b,), "int32"), I64))
        final = For(b, b_len, IfThenElse(ran, For(j, h, seq(
            Store(self.out, (imm(t_len), b, j), Load(self.hs, (b, j), F32)),
            Store(self.out, (imm(t_len + 1), b, j), Load(self.cs, (b, j), F32))), self.vec),
            For(j, h, seq(Store(self.out, (imm(t_len), b, j), zero()),
                          Store(self.out, (imm(t_len + 1), b, j), zero())), self.vec)))
        body = seq(self.pack(), init, For(s, t_len, step), final)
        for buf in (self.acc, self.hs, self.cs, self.rh) + (
                (self.rp,) if self.plain_r is not None else ()):
            body = Allocate(buf, body)
        return body
