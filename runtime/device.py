"""Devices in DLPack terms; only the host CPU (kDLCPU) exists in this runtime."""
from __future__ import annotations

K_DL_CPU = 1
_NAMES = {"cpu": K_DL_CPU, "llvm": K_DL_CPU}


class Device:
    """A (device_type, device_id) pair, as TVM's Device; kept so TVM-style code ports unchanged."""

    __slots__ = ("device_type", "device_id")

    def __init__(self, device_type: int = K_DL_CPU, device_id: int = 0) -> None:
        if device_type != K_DL_CPU:
            raise ValueError(f"unsupported device_type {device_type!r}; expected {K_DL_CPU} (cpu)")
        if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
            raise ValueError(f"device_id must be an int >= 0, got {device_id!r}")
        self.device_type = device_type
        self.device_id = device_id

    @property
    def exist(self) -> bool:
        """The host CPU always exists."""
        return True

    def sync(self) -> None:
        """Kernels run synchronously on the calling thread, so there is nothing to wait for."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Device)
            and other.device_type == self.device_type
            and other.device_id == self.device_id
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"cpu({self.device_id})"


def cpu(dev_id: int = 0) -> Device:
    """The host CPU device."""
    return Device(K_DL_CPU, dev_id)


def device(dev_type: str | int | Device = "cpu", dev_id: int = 0) -> Device:
    """A device by name ("cpu" or "llvm") or DLPack type code, as tvm.device does."""
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, str):
        key = dev_type.split()[0].lower() if dev_type.strip() else ""
        if key not in _NAMES:
            raise ValueError(f"unknown device {dev_type!r}; expected one of {sorted(_NAMES)}")
        return Device(_NAMES[key], dev_id)
    return Device(dev_type, dev_id)
