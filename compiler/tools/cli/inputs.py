"""--input handling: NAME=FILE.npy and FILE.npz values, checked before np.load; the inputs
not given are invented and announced (a dynamic dim no given input fixes is DEFAULT_DIM)."""
from __future__ import annotations

import os

import numpy as np

from runtime.specialised import TensorSpec
from .common import CliError, note

_NPY_MAGIC, _NPZ_MAGIC = b"\x93NUMPY", b"PK\x03\x04"
# an invented input's dynamic dim no given input binds (onnxruntime_perf_test's default too)
DEFAULT_DIM = 1


def load_array_file(path: str, item: str):
    """np.load of a .npy or .npz file, after checking it is one (np.load would call a text
    file "pickled data")."""
    if not os.path.isfile(path):
        raise CliError(f"bad --input {item!r}: no such file: {path}")
    with open(path, "rb") as f:
        head = f.read(6)
    if not (head.startswith(_NPY_MAGIC) or head.startswith(_NPZ_MAGIC)):
        raise CliError(f"bad --input {item!r}: {path} is not a NumPy .npy or .npz file (it "
                       f"starts with {head!r}); save arrays with numpy.save or numpy.savez")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise CliError(f"bad --input {item!r}: {path} is not a readable .npy/.npz file "
                       f"({type(err).__name__}: {err})") from None


def read_inputs(items: list[str] | None, names: list[str]) -> dict[str, np.ndarray]:
    """--input NAME=FILE.npy and --input FILE.npz (one array per input, by name) values."""
    feeds = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep:
            path = item
        elif not name:
            raise CliError(f"bad --input {item!r}: expected NAME=FILE.npy or FILE.npz")
        data = load_array_file(path, item)
        arrays = dict(data.items()) if isinstance(data, np.lib.npyio.NpzFile) else None
        if arrays is None and not sep:
            raise CliError(f"bad --input {item!r}: a .npy file holds one array; say which "
                           f"input it is with NAME={path} (inputs: {names})")
        if arrays is not None and sep:
            raise CliError(f"bad --input {item!r}: {path} is an .npz archive; give it without "
                           "NAME= (its arrays are matched to inputs by name)")
        for key, value in (arrays or {name: data}).items():
            if key not in names:
                raise CliError(f"bad --input {item!r}: the model has no input {key!r}; its "
                               f"inputs are {names}")
            feeds[key] = value
    return feeds


def feeds(args, specs: list[TensorSpec], announce: bool = True
          ) -> tuple[dict[str, np.ndarray], list[str]]:
    """Inputs from --input, the rest invented (arange(n)/n) and announced (unless --quiet or
    not `announce`);
    (feeds, names of the invented ones). An invented input's dynamic dims take the value
    the given inputs bind to the same symbol, else DEFAULT_DIM, and the note says so."""
    values = read_inputs(args.input, [s.name for s in specs])
    bound: dict[str, int] = {}
    for spec in specs:
        if spec.name in values and spec.shape is not None:
            for dim, size in zip(spec.shape, np.shape(values[spec.name])):
                if isinstance(dim, str):
                    bound.setdefault(dim, int(size))
    invented = [spec for spec in specs if spec.name not in values]
    for spec in invented:
        if spec.shape is None:
            raise CliError(f"input {spec.name!r} has no declared shape: give it with --input "
                           f"or pin it with --shape {spec.name}=D1,D2,...")
        shape = tuple(d if isinstance(d, int) else bound.get(d, DEFAULT_DIM) for d in spec.shape)
        defaulted = [d if d else "?" for d in spec.shape
                     if not isinstance(d, int) and d not in bound]
        n = int(np.prod(shape))
        values[spec.name] = (np.arange(n).reshape(shape) / max(n, 1)).astype(spec.dtype)
        if announce and not args.quiet:
            note(f"no --input for {spec.name!r} (shape {spec.shape_text()} {spec.dtype}): "
                 "using arange(n)/n" + (f" at {shape}: dynamic dims "
                                  f"{', '.join(map(str, defaulted))} default to {DEFAULT_DIM} "
                                  f"(pin them with --shape {spec.name}=D1,D2,...)"
                                  if defaulted else ""))
    return values, [spec.name for spec in invented]
