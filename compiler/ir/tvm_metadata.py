"""The `#[metadata]` section TVM's astext(show_meta_data=True) writes after a program: a JSON
node graph whose root maps "relay.Constant" to the constants `meta[relay.Constant][k]` names,
their values base64 NDArrays in "b64ndarrays". The parser reads it, so text saved by TVM
loads with its constants. Only constants are read; the file is untrusted, so every index and
type key is checked."""
from __future__ import annotations

import base64
import binascii
import json
import re

from runtime.params import load_ndarray

from .expr import Constant

_SECTION = re.compile(r"^#\[metadata\][ \t]*$", re.MULTILINE)


def split_metadata(source: str) -> tuple[str, str | None]:
    """(the program text, the JSON after a `#[metadata]` line or None)."""
    match = _SECTION.search(source)
    if match is None:
        return source, None
    return source[:match.start()], source[match.end():]


def _fail(msg: str) -> ValueError:
    return ValueError(f"#[metadata]: {msg}")


def _node(nodes: list, index, what: str) -> dict:
    try:
        index = int(index)
    except (TypeError, ValueError):
        raise _fail(f"{what}: node index {index!r} is not an int") from None
    if not 0 <= index < len(nodes) or not isinstance(nodes[index], dict):
        raise _fail(f"{what}: node index {index} out of range ({len(nodes)} nodes)")
    return nodes[index]


def read_metadata(text: str) -> dict[str, list[Constant]]:
    """{"relay.Constant": [Constant, ...]} from TVM's metadata JSON."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise _fail(f"not JSON ({err})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise _fail("expected an object with a 'nodes' list")
    nodes, arrays = doc["nodes"], doc.get("b64ndarrays", [])
    if not isinstance(arrays, list):
        raise _fail("'b64ndarrays' must be a list")
    root = _node(nodes, doc.get("root"), "root")
    keys, data = root.get("keys", []), root.get("data", [])
    if root.get("type_key") != "Map" or not isinstance(keys, list) or \
            not isinstance(data, list) or len(keys) != len(data):
        raise _fail("the root must be a Map of names to arrays")
    table: dict[str, list[Constant]] = {}
    for key, index in zip(keys, data):
        if key != "relay.Constant":
            raise _fail(f"entry {key!r} is not supported (only relay.Constant is read)")
        array = _node(nodes, index, key)
        items = array.get("data", [])
        if array.get("type_key") != "Array" or not isinstance(items, list):
            raise _fail(f"{key} must be an Array")
        table[key] = [_constant(nodes, arrays, item, f"{key}[{k}]")
                      for k, item in enumerate(items)]
    return table


def _constant(nodes: list, arrays: list, index, what: str) -> Constant:
    node = _node(nodes, index, what)
    attrs = node.get("attrs")
    if node.get("type_key") != "relay.Constant" or not isinstance(attrs, dict):
        raise _fail(f"{what} is a {node.get('type_key')!r} node, expected relay.Constant")
    try:
        slot = int(attrs.get("data"))
        encoded = arrays[slot]
        blob = base64.b64decode(encoded, validate=True)
    except (TypeError, ValueError, IndexError, binascii.Error) as err:
        raise _fail(f"{what}: bad array reference {attrs.get('data')!r} ({err})") from None
    try:
        return Constant(load_ndarray(blob, what))
    except ValueError as err:
        raise _fail(str(err)) from None
