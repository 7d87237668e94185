"""Dtype names the runtime accepts, and their DLPack (DLDataType) encodings."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

try:  # optional: numpy's bfloat16 comes from ml_dtypes (an onnx dependency); importing it
    import ml_dtypes  # noqa: F401  registers the dtype name "bfloat16" with numpy
except ImportError:  # pragma: no cover - then bfloat16 is not a runtime dtype
    ml_dtypes = None

# DLDataTypeCode values from dlpack.h.
DL_INT = 0
DL_UINT = 1
DL_FLOAT = 2
DL_BFLOAT = 4
# DLPack 1.1's float8 codes
DL_FLOAT8 = {"float8_e4m3fn": 10, "float8_e4m3fnuz": 11, "float8_e5m2": 12,
             "float8_e5m2fnuz": 13}
DL_FLOAT4_E2M1FN = 17


class DLDataType(NamedTuple):
    """A DLPack dtype triple, as stored in TVM's NDArray binary format."""

    code: int
    bits: int
    lanes: int = 1


# TVM spells bool as "bool" and encodes it as a 1-bit unsigned integer stored in one byte.
_BY_NAME: dict[str, DLDataType] = {
    "bool": DLDataType(DL_UINT, 1),
    "int8": DLDataType(DL_INT, 8),
    "int16": DLDataType(DL_INT, 16),
    "int32": DLDataType(DL_INT, 32),
    "int64": DLDataType(DL_INT, 64),
    "uint8": DLDataType(DL_UINT, 8),
    "uint16": DLDataType(DL_UINT, 16),
    "uint32": DLDataType(DL_UINT, 32),
    "uint64": DLDataType(DL_UINT, 64),
    "float16": DLDataType(DL_FLOAT, 16),
    "float32": DLDataType(DL_FLOAT, 32),
    "float64": DLDataType(DL_FLOAT, 64),
}
if ml_dtypes is not None:
    _BY_NAME["bfloat16"] = DLDataType(DL_BFLOAT, 16)
    _BY_NAME.update({name: DLDataType(code, 8) for name, code in DL_FLOAT8.items()})
    _BY_NAME["float4_e2m1fn"] = DLDataType(DL_FLOAT4_E2M1FN, 4)
    _BY_NAME.update({"int4": DLDataType(DL_INT, 4), "uint4": DLDataType(DL_UINT, 4),
                     "int2": DLDataType(DL_INT, 2), "uint2": DLDataType(DL_UINT, 2)})
_BY_DL: dict[DLDataType, str] = {v: k for k, v in _BY_NAME.items()}
SUPPORTED_DTYPES: tuple[str, ...] = tuple(_BY_NAME)
_NUMPY_DTYPES: dict[str, np.dtype] = {}  # supported name -> its numpy dtype (a memo)


def dtype_name(dtype: object) -> str:
    """Normalise a dtype spelling (str, numpy dtype or type) to the runtime's name, or raise."""
    try:
        name = np.dtype(dtype).name  # type: ignore[call-overload]
    except TypeError as err:
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {SUPPORTED_DTYPES}") from err
    if name not in _BY_NAME:
        raise TypeError(f"unsupported dtype {name!r}; expected one of {SUPPORTED_DTYPES}")
    return name


def numpy_dtype(name: str) -> np.dtype:
    """The little-endian numpy dtype for a runtime dtype name (remembered per name: the
    executors ask for the same few on every kernel call)."""
    if type(name) is str:
        dt = _NUMPY_DTYPES.get(name)
        if dt is None:
            dt = _NUMPY_DTYPES.setdefault(name, np.dtype(dtype_name(name)).newbyteorder("<"))
        return dt
    return np.dtype(dtype_name(name)).newbyteorder("<")


def to_dl(name: str) -> DLDataType:
    """DLDataType for a runtime dtype name."""
    return _BY_NAME[dtype_name(name)]


def from_dl(code: int, bits: int, lanes: int) -> str:
    """Runtime dtype name for a DLDataType triple; ValueError when the runtime cannot hold it."""
    key = DLDataType(code, bits, lanes)
    if key not in _BY_DL:
        raise ValueError(
            f"unsupported DLDataType(code={code}, bits={bits}, lanes={lanes}); "
            f"expected one of {sorted(tuple(t) for t in _BY_DL)}"
        )
    return _BY_DL[key]
