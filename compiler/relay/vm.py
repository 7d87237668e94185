"""relay.vm: compile a Relay program for the Relay VM (TVM's tvm.relay.vm).

    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = runtime.vm.VirtualMachine(exe, runtime.cpu())
    out = vm.invoke("main", x)          # or vm.run(x); set_input + invoke_stateful
"""
from compiler.driver.build_vm import compile  # noqa: F401  (TVM's name)
from runtime.vm import ADT, Executable, VirtualMachine  # noqa: F401

__all__ = ["compile", "Executable", "VirtualMachine", "ADT"]
