"""tvm.ir.save_json / load_json: a module or expression as a JSON string that round-trips
(load_json(save_json(m)) is structurally equal to m). The JSON holds the text format and the
constants the text prints as meta[relay.Constant][k], as a params blob; it is not TVM's node
graph JSON, so files from TVM are refused by name."""
from __future__ import annotations

import base64
import binascii
import json

from runtime.params import load_param_dict, save_param_dict

from .expr import Constant, RelayExpr
from .module import IRModule
from .parser import parse, parse_expr
from .printer import astext, meta_table

_FORMAT = "relayjit.ir.json"
_VERSION = 1


def save_json(node: IRModule | RelayExpr) -> str:
    """A JSON string holding `node` (an IRModule or a Relay expression)."""
    if not isinstance(node, (IRModule, RelayExpr)):
        raise TypeError(f"save_json expects an IRModule or a Relay expression, got "
                        f"{type(node).__name__}")
    constants = meta_table(node)["relay.Constant"]
    blob = save_param_dict({str(k): c.data for k, c in enumerate(constants)})
    return json.dumps({"format": _FORMAT, "version": _VERSION,
                       "kind": "module" if isinstance(node, IRModule) else "expr",
                       "text": astext(node),
                       "constants": base64.b64encode(blob).decode("ascii")})


def load_json(json_str: str) -> IRModule | RelayExpr:
    """The module or expression save_json wrote (untrusted input: every field is checked)."""
    try:
        doc = json.loads(json_str)
    except (TypeError, ValueError) as err:
        raise ValueError(f"load_json: not JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ValueError("load_json: not a relayjit IR JSON document (TVM's node JSON is not "
                         "read: save the module's text with astext() and use relay.parse)")
    if doc.get("version") != _VERSION or doc.get("kind") not in ("module", "expr") \
            or not isinstance(doc.get("text"), str) or not isinstance(doc.get("constants"), str):
        raise ValueError(f"load_json: expected version {_VERSION}, kind module|expr and str "
                         f"text/constants, got {({k: type(v).__name__ for k, v in doc.items()})}")
    try:
        blob = base64.b64decode(doc["constants"], validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"load_json: constants are not base64 ({err})") from None
    params = load_param_dict(blob)
    if set(params) != {str(k) for k in range(len(params))}:
        raise ValueError(f"load_json: constants must be numbered 0..n-1, got {sorted(params)}")
    table = {"relay.Constant": [Constant(params[str(k)]) for k in range(len(params))]}
    if doc["kind"] == "module":
        return parse(doc["text"], "load_json", init_meta_table=table)
    return parse_expr(doc["text"], "load_json", init_meta_table=table)
