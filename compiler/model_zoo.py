"""The nine real model graphs that ship inside the onnx package, with their reference outputs.

ONNX's own runner feeds them `arange(n) / n` reshaped to the input shape and compares with
the stored `<model>_output_0.pb`; we do the same, so no download is ever needed.
"""
from __future__ import annotations

import os

import numpy as np

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")


def light_model_dir() -> str:
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def light_model_path(name: str) -> str:
    """Path of a light model by short name ("resnet50") or file name."""
    short = name.removeprefix("light_").removesuffix(".onnx")
    if short not in LIGHT_MODELS:
        raise ValueError(f"unknown light model {name!r}; the onnx package ships "
                         f"{', '.join(LIGHT_MODELS)}")
    return os.path.join(light_model_dir(), f"light_{short}.onnx")


def dummy_inputs(model) -> dict[str, np.ndarray]:
    """ONNX's runner inputs for a light model: arange(n)/n per non-initializer float input."""
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in value.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[value.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def reference_outputs(model_path: str) -> list[np.ndarray] | None:
    """The stored `<model>_output_<i>.pb` arrays beside a model file, or None when absent."""
    from onnx import TensorProto, numpy_helper
    prefix = os.path.splitext(model_path)[0]
    outputs = []
    while os.path.exists(f"{prefix}_output_{len(outputs)}.pb"):
        tensor = TensorProto()
        with open(f"{prefix}_output_{len(outputs)}.pb", "rb") as f:
            tensor.ParseFromString(f.read())
        outputs.append(numpy_helper.to_array(tensor))
    return outputs or None
