"""The strategy layer: which implementation computes an anchor op, with what configuration
(TVM's op strategies: OpStrategy, OpImplementation, select_implementation).

How an implementation is chosen
    Each anchor op carries a strategy function (op attribute FTVMStrategy, registered with
    `register_strategy`). Given a call (CallInfo: attrs, argument and result types, the indices
    of its constant arguments) and the build's CodegenOptions (target CPU, vector width,
    overrides), it returns an OpStrategy: the implementations that apply (dtype, layout, target
    features, shape bounds), each with the Workload it is configured for (a hashable record of
    the shapes, dtypes and attributes that decide its code), its compute glue and a priority.
    `select` takes the highest priority (the first of equals); today's heuristics set the
    priorities where implementations compete (Winograd above direct where winograd_tile_size
    finds it pays; GEMV above GEMM for a dense of at most 4 rows). When the op has no strategy
    or nothing applies, the lowering runs the op's generic compute rule (compiler.op.compute:
    plain reductions in any dtype). Compute rules never choose a schedule.

Where configurations come from
    An implementation names its configuration type (a frozen ScheduleConfig dataclass of the
    schedule: tiles, algorithm, blocking, parallel split, unrolling, switches; hashable and
    JSON both ways) and its default configuration: `resolve(workload, options, given)`, today's
    heuristics as a function of the workload and the target, filling the fields `given` leaves
    None. `configure` gives it, in order, the options' overrides for the implementation
    (PassContext config "relayjit.schedule_config": {implementation: {field: value}}) and the
    facts the call fixes (a packed weight's block). Tuning records will slot in there, keyed by
    implementation, Workload.key(), target and thread count (Choice.key() names the result).

Layouts decided once
    An implementation's configuration may imply a weight layout (`weight_layout`: a conv's
    packed channel block, a Winograd tile, a dense's panels). AlterOpLayout / PackConstantWeights
    ask the strategy for the call with its weight constant (alter.alter_layout, the op's
    FTVMAlterOpLayout) and pack what the chosen configuration reads; the rewritten op's strategy
    selects the same implementation for the same workload at lowering, with the layout as a
    fact, so the pass and the schedule agree by construction. ConvertBlockedLayout asks
    `blocked_conv_supported` and takes x from the options' vector width (where the blocked
    layout pays is its own BlockedLayoutGuard, PassContext config
    "relayjit.blocked_layout_guard").

What a schedule is given
    The build's CodegenOptions (target CPU and features, vector width, kernel families,
    parallel policy, vectorize, the schedule_config overrides) and its resolved configuration,
    as arguments: no module flag and no environment read below the build driver
    (compiler.driver.build.codegen_options_for reads $RELAYJIT_VECTOR_WIDTH and
    $RELAYJIT_KERNEL_FAMILIES once). CodegenOptions.key() is part of the build-cache key; the
    kernel cache keys the TIR the options made with the CPU and kernel families. The
    micro-kernels a schedule calls are typed descriptors (codegen.llvm.microkernels), whose
    code is a function of the descriptor and the CPU alone. A schedule storing each output
    element once through its epilogue says so (mark_epilogue's in_place / casts): codegen.lower
    then fuses an elementwise consumer of another dtype into it (a cast, a comparison, an int8
    requantisation of an int32 accumulator tile).

How a new implementation registers
    1. Write the schedule in codegen/schedules taking (tensors, ..., options, config) with a
       ScheduleConfig subclass and a resolve_* function (the default: all fields None means
       "decide"; given fields are kept, and checked).
    2. Declare it here: `implementation(name, ConfigType, resolve(workload, options, given),
       weight_layout=None)`.
    3. In the op's strategy function, `strategy.add(impl, Workload.of(kind, ...), compute,
       plevel)` where it applies (int8 VNNI kernels: an applicability test on the dtypes and
       the options' CPU features; symbolic extents: their own workload kind and schedule).

Modules: registry (the machinery), conv2d, dense, pool (pools, softmax, layer norm), alter,
recurrent (RNN/GRU/LSTM layers), int8 (the QNN contractions' int8 kernels and the rewrite
that packs their weights).
"""
from __future__ import annotations

from .registry import (STRATEGY, CallInfo, Choice, Implementation, OpStrategy, Workload,
                       compute_with_strategy, configure, implementations, register_strategy,
                       select)
from . import conv2d, dense, pool  # noqa: F401  (registers the strategies)
from .alter import alter_layout
from . import recurrent  # noqa: F401,E402  (after alter: registers its layout rewrite)
from . import int8  # noqa: F401,E402  (registers the int8 strategies and rewrites)
from .conv2d import PackedConvWeight, WinogradWeight, blocked_conv_supported
from .dense import PackedDenseWeight

__all__ = ["STRATEGY", "CallInfo", "Choice", "Implementation", "OpStrategy", "Workload",
           "compute_with_strategy", "configure", "implementations", "register_strategy",
           "select", "alter_layout", "PackedConvWeight", "WinogradWeight", "PackedDenseWeight",
           "blocked_conv_supported"]
