"""Register-tiled micro-kernels emitted directly as LLVM IR with vector FMAs.

A schedule describes the micro-kernel it wants with a descriptor (descriptors.py: Gemm,
GemmRows, Gemv, Conv, ConvBlocked, ConvRows, frozen records of the tile, window and strides)
and calls it through a TIR call `Evaluate(Call(descriptor.symbol, args))`
(codegen.schedules.common.ukr_call). The emitter hands every call whose name starts with
`relayjit.ukr.` to `emit_call` (calls.py), which looks the descriptor up by its symbol and
declares the function with the argument types the descriptor declares: an argument declared a
pointer is a TIR `Load`, passed as the *address* of the element; any other an i64 value.
codegen.microkernel_objects compiles each descriptor's definition (`define`) once per target
CPU, in a module of its own, and links it in.

Kernels (all accumulate in registers through the whole reduction loop, unrolled by hand;
functions are `noinline` so their register allocation stays isolated):

- Gemm `gemm_<MR>x<NR>`: C[MR, NR] (+)= A_packed[kc][MR] * B_packed[kc][NR], args (kc, a, b,
  c, ldc, accumulate, b_next); GemmRows `gemm_<MR>x<NR>_rows` reads A in place (row i at
  a + i*lda), args (kc, a, lda, b, c, ldc, accumulate, b_next), and `gemm_<MR>x<NR>_rows_pf`
  also prefetches the row tile read next, args (..., b_next, a_next). A row is two vectors
  of NR/2 floats (6x16 with <8 x float> on AVX2: 12 accumulators + 2 B vectors + 1
  broadcast = 15 of 16 ymm; 8x32 or 12x32 with <16 x float> when the host has AVX-512), or
  NR/VW vectors of VW floats in `gemm_<MR>x<NR>x<VW>` (8x48x16: 24 zmm accumulators + 3 B
  vectors + 1 broadcast). b_next is the B panel the caller reads next: prefetched into L2 at
  the pace b is read (constant weights stream from memory).
- Gemv `gemv_<NR>` (`gemv_<NR>x<VW>`, `..._<P>` for P panels a call): c[NR] = sum_k x[k] *
  B_packed[k][NR] for each of P consecutive panels (matrix-vector, M = 1 dense on pre-packed
  weight panels); args (k, x, b, c, panel_stride). Four k steps in flight, each with its own
  accumulators, so FMA latency is hidden while the panels stream from memory.
- Conv `conv_<KB>_<P>_<R>_<S>_<rowstep>_<chanstep>_<dh>_<dw>_<CM>_<PF>`: direct
  convolution, KB output channels (two vectors; `conv_<KB>x<VW>_...`: KB/VW vectors of VW,
  three of 16 for 48 channels) x P pixels: T[p][v] = sum_{c,r,s}
  x_p[c*chanstep + r*dh*rowstep + s*dw] * W[c][r][s][v]; args (w, t, acc, C, w_next, x_0,
  ..., x_{P-1}); each channel also prefetches PF lines from w_next on (into L2, 0: none):
  with acc != 0 the tile accumulates (T += ...: the accumulators start from a pixel-major
  T), so a schedule can block the reduction over input channels. With CM = 1 the tile is
  stored channel-major instead, T[v][p] with rows of VW >= P pixels (transposed in
  registers), so the schedule's epilogue reads a channel's pixels contiguously, as NCHW
  stores them; schedules ask for it on the last channel block. `conv_..._<PF>_<SW>`: a row
  tile, P consecutive pixels of one output row SW apart in the input, args (w, t, acc, C,
  w_next, x_0); each input value is broadcast once for all the taps that read it.
- ConvBlocked `convb_<KB>x<VW>_<P>_<R>_<S>_<rowstep>_<blockstep>_<dh>_<dw>_<CB>_<PF>_<SW>`:
  the same kernel over a channel-blocked input (NCHW[CB]c: CB channels one float apart,
  blocks blockstep apart; SW 0 for one pointer a pixel), its tile pixel-major.
- ConvRows `convrows_...`: KC output channels x NV vectors of consecutive output pixels of
  one row (or of NV stacked rows) over the input's phase planes, any stride (conv.py).
- Int8Dot `dot8_...`: uint8 data x int8 weights into int32, P rows (GEMM rows or conv
  pixels, a pointer each) x NV vectors of int32 lanes, four input channels a lane, over a
  window's taps; `vpdpbusd` where the target has VNNI, else `vpmaddwd` on operands widened
  to 16 bits (AVX512BW, AVX2) or plain widening multiplies, both exact (int8.py);
  Interleave4 `interleave4_<W>` four byte rows into one row of four-byte pixels (the int8
  conv's input layout).
"""
from __future__ import annotations

from .calls import DEFINITIONS, declare, define, emit_call
from .descriptors import (I64, KINDS, PREFIX, PTR, Conv, ConvBlocked, ConvRows, Gemm,
                          GemmRows, Gemv, Int8Dot, Interleave4, Microkernel, by_symbol)

__all__ = ["DEFINITIONS", "I64", "KINDS", "PREFIX", "PTR", "Conv", "ConvBlocked", "ConvRows",
           "Gemm", "GemmRows", "Gemv", "Int8Dot", "Interleave4", "Microkernel", "by_symbol",
           "declare", "define", "emit_call"]
