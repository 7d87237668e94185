"""relay.annotation: annotation ops (stop_fusion), as tvm.relay.annotation; on_device and
function_on_device are placement annotations, which on a single CPU place nothing."""
from compiler.errors import CompilerError
from compiler.op.annotation import *  # noqa: F401,F403
from compiler.op.annotation import __all__ as _op_names
from runtime.device import Device, device as to_device

__all__ = list(_op_names) + ["on_device", "function_on_device"]


def _check_cpu(device, what: str) -> None:
    if isinstance(device, Device):
        return
    try:
        to_device(device)
    except (TypeError, ValueError) as err:
        raise CompilerError(f"relay.annotation.{what}: {device!r} is not the CPU ({err}); "
                            "relayjit runs everything on the host CPU") from None


def on_device(body, device, constrain_result: bool = False, constrain_body: bool = True):
    """`body` itself: everything already runs on the one CPU (another device is an error)."""
    _check_cpu(device, "on_device")
    return body


def function_on_device(function, param_devices, result_device):
    """`function` itself, once every device named is the CPU."""
    for device in [*param_devices, result_device]:
        _check_cpu(device, "function_on_device")
    return function
