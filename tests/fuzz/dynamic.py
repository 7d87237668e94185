"""The VM engines of the oracle: a case on the Relay VM as generated, and with dynamic dims.

dynamic_variant(model) declares the graph inputs' leading dim (and half the time their last
one) as a dim_param, named after the position and the size it has in the feeds (inputs of the
same size share the symbol, as an exporter's dynamic axes do; the feeds keep satisfying every
declaration), and drops the declared sizes of outputs and intermediates. from_onnx then
imports those dims as relay.Any, so the VM runs the case through shape programs and kernels
specialised at run time, where relay.build would refuse it.
"""
from __future__ import annotations

import onnx

DYNAMIC_LAST_AXIS = 0.5


def dynamic_variant(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """The model with dynamic input dims (see the module docstring)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    initializers = {t.name for t in out.graph.initializer}
    for k, info in enumerate(out.graph.input):
        if info.name in initializers:
            continue
        dims = info.type.tensor_type.shape.dim
        axes = {0, len(dims) - 1} if (seed + k) % 2 else {0}
        for axis in axes:
            if 0 <= axis < len(dims) and dims[axis].HasField("dim_value"):
                size = dims[axis].dim_value
                dims[axis].dim_param = f"{'n' if axis == 0 else 's'}{size}"
    del out.graph.value_info[:]
    for info in out.graph.output:
        for dim in info.type.tensor_type.shape.dim:  # the rank stays, the sizes go
            dim.ClearField("dim_value")
    return out


def run_relayjit_vm(model: onnx.ModelProto, feeds: dict, dynamic: bool) -> list:
    """The outputs of the case on the VM (relay.vm.compile at opt_level 3), run twice: the
    second run reuses its kernels, storage and shape programs' results."""
    import runtime
    from compiler import relay, transform
    from runtime.vm import VirtualMachine
    if dynamic:
        model = dynamic_variant(model, len(feeds))
    mod, params = relay.frontend.from_onnx(model)
    with transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = VirtualMachine(exe, runtime.cpu())
    names = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    args = [feeds[n] for n in names]
    outputs = None
    for _ in range(2):
        result = vm.run(*args)
        outputs = list(result) if isinstance(result, tuple) else [result]
    return [o.numpy() for o in outputs]
