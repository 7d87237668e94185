"""Helpers for tests that call the schedules directly: the host's CodegenOptions (at the
width the `width` fixture runs, by default $RELAYJIT_VECTOR_WIDTH as relay.build reads it) and
the packed weight geometry of the default configuration."""
from __future__ import annotations

import re
from dataclasses import replace

from codegen.llvm.microkernels import Microkernel, by_symbol
from codegen.options import CodegenOptions
from codegen.parallel import ParallelPolicy
from codegen.schedules import conv2d_pack_geometry, dense_pack_geometry
from codegen.schedules.conv2d_config import channel_block
from codegen.schedules.gemm_config import resolve_gemm
from compiler.driver.build import current_options


def host(width: int | None = None) -> CodegenOptions:
    """The host's options at `width`, else as relay.build would resolve them now."""
    return current_options() if width is None else CodegenOptions.host(vector_width=width)


def eager(width: int | None = None) -> CodegenOptions:
    """host(width) with every loop of more than one iteration's work parallel (tests of a
    split or its loop order, not of whether it pays)."""
    return replace(host(width), parallel=ParallelPolicy(min_thread_ns=1))


def microkernels_in(text: str, kind: type = Microkernel) -> list:
    """The descriptors of the micro-kernels a kernel's text calls (of one kind), in the order
    of their symbols."""
    found = {by_symbol(name) for name in re.findall(r"relayjit\.ukr\.[\w.]+", text)}
    return sorted((k for k in found if type(k) is kind or kind is Microkernel),
                  key=lambda k: k.symbol)


def conv_pack(k: int, cg: int, r: int, s: int, groups: int = 1,
              options: CodegenOptions | None = None) -> tuple:
    """The packed conv weight's shape in the default configuration's channel blocks."""
    options = options or host()
    return conv2d_pack_geometry(k, cg, r, s, groups, channel_block(k // groups,
                                                                   options.vector_width))


def dense_pack(m: int, n: int, k: int, options: CodegenOptions | None = None) -> tuple:
    """The packed dense weight's shape in the default (GEMM) configuration's panels."""
    return dense_pack_geometry(n, k, resolve_gemm(m, n, k, True, options or host(), wide=True))


def gemm_config(m: int, n: int, k: int, width: int, a_in_place: bool = True):
    """The dense family's default GEMM configuration at a vector width."""
    return resolve_gemm(m, n, k, a_in_place, host(width), wide=True)
