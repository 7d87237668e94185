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


def with_random_weights(model, seed: int = 0):
    """A copy of a light model whose constant-filled weights are random (He-scaled).

    The shipped weights are ConstantOfShape fills, so every class scores the same and the
    stored reference cannot tell a right network from a wrong one; random weights can, when
    compared with another runtime. BatchNormalization statistics stay positive where needed.
    """
    import onnx
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    bn_role = {}
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            for role, name in enumerate(node.input):
                bn_role[name] = role
    keep = []
    for node in model.graph.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if (node.op_type != "ConstantOfShape" or node.input[0] not in inits
                or value is None or value.data_type != onnx.TensorProto.FLOAT):
            keep.append(node)
            continue
        shape = tuple(int(d) for d in inits[node.input[0]])
        role = bn_role.get(node.output[0])
        if role == 1:  # scale
            data = rng.uniform(0.3, 0.8, shape)
        elif role == 4:  # variance
            data = rng.uniform(0.5, 1.5, shape)
        elif role in (2, 3) or len(shape) <= 1:  # shift, mean, biases
            data = rng.uniform(-0.2, 0.2, shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            data = rng.normal(0.0, np.sqrt(1.0 / max(fan_in, 1)), shape)
        model.graph.initializer.append(
            numpy_helper.from_array(data.astype(np.float32), node.output[0]))
    used = {name for node in keep for name in node.input}
    unused = [i for i in model.graph.initializer if i.name not in used]
    for init in unused:
        model.graph.initializer.remove(init)
    gone = {i.name for i in unused}
    for value in [v for v in model.graph.input if v.name in gone]:
        model.graph.input.remove(value)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model
