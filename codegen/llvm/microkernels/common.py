"""IR helpers the micro-kernels share: FMA and prefetch declarations, vector loads, stores and
broadcasts, counted loops with carried values, in-register transposes."""
from __future__ import annotations

from llvmlite import ir

from ..textir import TextBlock, TextBuilder
from ..types import F32, I64, PTR
from .descriptors import PTR as ARG_PTR, Microkernel

I32 = ir.IntType(32)
LINE_FLOATS = 16  # floats a 64-byte cache line


def fma_decl(module: ir.Module, vw: int) -> ir.Function:
    # declare_intrinsic fails for vector types in llvmlite 0.50: declare by name
    vt = ir.VectorType(F32, vw)
    fn = module.globals.get(f"llvm.fma.v{vw}f32")
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(vt, [vt, vt, vt]), f"llvm.fma.v{vw}f32")
    return fn


def splat(b: TextBuilder, ptr: ir.Value, vw: int) -> ir.Value:
    vt = ir.VectorType(F32, vw)
    s = b.load(ptr, typ=F32, align=4)
    v = b.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(I32, 0))
    return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, vw), [0] * vw))


def vload(b: TextBuilder, base: ir.Value, offset: int, vw: int) -> ir.Value:
    p = b.gep(base, [ir.Constant(I64, offset)], inbounds=True, source_etype=F32) \
        if offset else base
    return b.load(p, typ=ir.VectorType(F32, vw), align=4)


def vstore(b: TextBuilder, val: ir.Value, base: ir.Value, offset: ir.Value | int) -> None:
    off = ir.Constant(I64, offset) if isinstance(offset, int) else offset
    p = b.gep(base, [off], inbounds=True, source_etype=F32)
    b.store(val, p, align=4)


def llvm_args(kernel: Microkernel) -> list[ir.Type]:
    """The LLVM types of the arguments the descriptor declares."""
    return [PTR if t == ARG_PTR else I64 for t in kernel.args]


def new_function(module: ir.Module, kernel: Microkernel) -> ir.Function:
    """The micro-kernel's function, typed as its descriptor declares (internal, noinline)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), llvm_args(kernel)), kernel.symbol)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("nounwind")
    return fn


def counted_loop(b: TextBuilder, fn: ir.Function, count: ir.Value, carried: list[ir.Value],
                  body, tag: str) -> list[ir.Value]:
    """for it in [0, count): carried = body(b, it, carried); guarded for count == 0."""
    pre = b.block
    loop = TextBlock(fn, f"{tag}.body")
    done = TextBlock(fn, f"{tag}.end")
    b.cbranch(b.icmp_signed(">", count, ir.Constant(I64, 0)), loop, done)
    b.position_at_end(loop)
    it = b.phi(I64, name=f"{tag}.i")
    it.add_incoming(ir.Constant(I64, 0), pre)
    phis = []
    for k, v in enumerate(carried):
        p = b.phi(v.type, name=f"{tag}.c{k}")
        p.add_incoming(v, pre)
        phis.append(p)
    new = body(b, it, phis)
    nxt = b.add(it, ir.Constant(I64, 1), flags=("nuw", "nsw"))
    last = b.block
    it.add_incoming(nxt, last)
    for p, v in zip(phis, new):
        p.add_incoming(v, last)
    b.cbranch(b.icmp_signed("<", nxt, count), loop, done)
    b.position_at_end(done)
    out = []
    for k, (v0, v1) in enumerate(zip(carried, new)):
        p = b.phi(v0.type, name=f"{tag}.out{k}")
        p.add_incoming(v0, pre)
        p.add_incoming(v1, last)
        out.append(p)
    return out



def prefetch_l2_decl(module: ir.Module) -> ir.Function:
    fn = module.globals.get("llvm.prefetch.p0")
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]),
                         "llvm.prefetch.p0")
    return fn


def transpose(b: TextBuilder, rows: list[ir.Value], lanes: int | None = None
               ) -> list[ir.Value]:
    """Transpose an n x n block held as n vectors (n a power of two): log2(n) stages of
    two-source shuffles, each swapping the off-diagonal halves of blk x blk blocks. With
    vectors of more lanes than rows (lanes = 2n), each n-lane half transposes on its own:
    row i comes out holding column i of the low halves, then column i of the high halves."""
    n = len(rows)
    lanes = n if lanes is None else lanes
    rows = list(rows)
    blk = n // 2
    while blk >= 1:
        lo = ir.Constant(ir.VectorType(I32, lanes), [j if not j & blk else lanes + j - blk
                                                    for j in range(lanes)])
        hi = ir.Constant(ir.VectorType(I32, lanes), [j + blk if not j & blk else lanes + j
                                                    for j in range(lanes)])
        new = list(rows)
        for i in range(n):
            if not i & blk:
                new[i] = b.shuffle_vector(rows[i], rows[i + blk], lo)
                new[i + blk] = b.shuffle_vector(rows[i], rows[i + blk], hi)
        rows = new
        blk //= 2
    return rows

