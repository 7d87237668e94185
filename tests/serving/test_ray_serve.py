"""Two replicas of an exported small CNN on a local Ray Serve (loopback only): concurrent
requests, a replica killed mid-run, bad requests, dynamic batching; and a model with dynamic
axes taking requests of any shape."""
from __future__ import annotations

import io
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.tools.session import load_model
from runtime import serving
from runtime.dynamic_module import DynamicModule
from runtime.target import host_info

from .models import INPUT, SHAPE, export_cnn, reference

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
requests = pytest.importorskip("requests")

RNG = np.random.default_rng(11)
APP = "relayjit"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dynamic_model():
    """y[batch, seq] = x[batch, seq] * 2: served at any length."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    path = export_cnn(str(root / "cnn.rjit"))
    batched = export_cnn(str(root / "cnn4.rjit"), batch=4)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="error", log_to_driver=False)
    try:
        srv = serving.start(path, replicas=2, port=_free_port(), num_cpus=0.5, name=APP)
        serve.run(serving.application(batched, num_cpus=0.5), name="batched",
                  route_prefix="/batched")
        dynamic = str(root / "dynamic.rjit")
        DynamicModule(_dynamic_model().SerializeToString(), "onnx", 3, "llvm",
                      host_info()).export_library(dynamic)
        serve.run(serving.application(dynamic, num_cpus=0.5, loader=load_model),
                  name="dynamic", route_prefix="/dynamic")
        yield srv, path, batched
    finally:
        serve.shutdown()
        ray.shutdown()


def _post(url: str, x: np.ndarray, npz: bool, retries: int = 0) -> np.ndarray:
    """The output for input x; with retries, connection errors, timeouts and 5xx answers are
    retried (a request routed to a replica that is being killed may never be answered: the
    client gives up on it after a short timeout and asks again, as a load balancer would)."""
    if npz:
        buffer = io.BytesIO()
        np.savez(buffer, **{INPUT: x})
        kwargs = {"data": buffer.getvalue(), "headers": {"Content-Type": serving.NPZ_TYPE}}
    else:
        kwargs = {"data": json.dumps({INPUT: x.tolist()}),
                  "headers": {"Content-Type": serving.JSON_TYPE}}
    timeout = 10 if retries else 30
    for attempt in range(retries + 1):
        try:
            r = requests.post(url, timeout=timeout, **kwargs)
        except (requests.ConnectionError, requests.Timeout):
            if attempt == retries:
                raise
            time.sleep(0.2)
            continue
        if r.status_code < 500 or attempt == retries:
            break
        time.sleep(0.2)
    assert r.status_code == 200, r.text
    if npz:
        return np.load(io.BytesIO(r.content))["output_0"]
    return np.array(r.json()["output_0"], dtype="float32")


def _inputs(n: int, batch: int = 1) -> np.ndarray:
    return RNG.standard_normal((n, batch, *SHAPE)).astype("f4")


def test_metadata_and_health(server):
    srv, _, _ = server
    meta = requests.get(srv.url + "metadata", timeout=30).json()
    assert meta["inputs"] == {INPUT: {"shape": [1, *SHAPE], "dtype": "float32"}}
    assert meta["outputs"] == {"output_0": {"shape": [1, 10], "dtype": "float32"}}
    assert meta["threads"] == 1
    assert requests.get(srv.url + "healthz", timeout=30).json() == {"status": "ok"}


def test_200_concurrent_requests_all_right(server):
    srv, path, _ = server
    xs = _inputs(200)
    expected = [reference(path, x) for x in xs]
    with ThreadPoolExecutor(16) as pool:
        outs = list(pool.map(lambda k: _post(srv.url, xs[k], npz=k % 2 == 0), range(200)))
    for out, ref in zip(outs, expected):  # JSON's decimal text round-trips float32 exactly
        np.testing.assert_array_equal(out, ref)


def _replicas() -> list[str]:
    return sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                  if a["name"].startswith(f"SERVE_REPLICA::{APP}#"))


def test_killed_replica_is_replaced_and_no_request_is_lost(server):
    srv, path, _ = server
    before = _replicas()
    assert len(before) == 2
    xs = _inputs(60)
    expected = [reference(path, x) for x in xs]
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(_post, srv.url, x, True, 30) for x in xs]
        futures[10].result()
        ray.kill(ray.get_actor(before[0], namespace="serve"), no_restart=True)
        outs = [f.result() for f in futures]
    for out, ref in zip(outs, expected):
        np.testing.assert_array_equal(out, ref)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        replicas = _replicas()
        running = serve.status().applications[APP].deployments[APP].replica_states.get("RUNNING")
        if running == 2 and len(replicas) == 2 and before[0] not in replicas:
            break
        time.sleep(0.5)
    assert running == 2 and len(replicas) == 2 and before[0] not in replicas, (running, replicas)


def test_bad_requests_get_400_and_replicas_keep_serving(server):
    srv, path, _ = server
    x = _inputs(1)[0]
    bad = [
        ({"data": b"{not json"}, "request body is not valid JSON"),
        ({"json": {"image": x.tolist()}}, "unknown input(s) ['image']"),
        ({"json": {INPUT: x[:, :2].tolist()}}, f"input '{INPUT}': expected shape (1, 3, 16, 16)"
                                               " dtype float32, got shape (1, 2, 16, 16)"),
        ({"json": {INPUT: [[["x"]]]}}, f"input '{INPUT}': expected numbers"),
    ]
    buffer = io.BytesIO()
    np.savez(buffer, **{INPUT: x.astype("int32")})
    bad.append(({"data": buffer.getvalue(), "headers": {"Content-Type": serving.NPZ_TYPE}},
                "dtype float32, got shape (1, 3, 16, 16) dtype int32"))
    for kwargs, message in bad * 2:  # each replica (probably) sees each
        r = requests.post(srv.url, timeout=30, **kwargs)
        assert r.status_code == 400 and message in r.json()["error"], r.text
    np.testing.assert_array_equal(_post(srv.url, x, npz=False), reference(path, x))


def test_single_samples_are_batched_dynamically(server):
    srv, _, batched = server
    url = srv.url + "batched"
    assert requests.get(url + "/metadata", timeout=30).json()["batch_size"] == 4
    xs = _inputs(12)
    with ThreadPoolExecutor(12) as pool:
        outs = list(pool.map(lambda x: _post(url, x, npz=True), xs))
    for x, out in zip(xs, outs):
        np.testing.assert_array_equal(out, reference(batched, np.concatenate([x] * 4))[:1])
    full = _inputs(1, batch=4)[0]
    np.testing.assert_array_equal(_post(url, full, npz=True), reference(batched, full))


def test_a_dynamic_model_takes_requests_of_any_shape(server):
    srv, _, _ = server
    url = srv.url + "dynamic"
    meta = requests.get(url + "/metadata", timeout=30).json()
    assert meta["inputs"] == {"x": {"shape": ["batch", "seq"], "dtype": "float32"}}
    for batch, seq in [(1, 3), (2, 7), (1, 3), (4, 1)]:
        x = RNG.standard_normal((batch, seq)).astype("f4")
        r = requests.post(url, json={"x": x.tolist()}, timeout=60)
        assert r.status_code == 200, r.text
        np.testing.assert_array_equal(np.array(r.json()["output_0"], dtype="f4"), x * 2)
    r = requests.post(url, json={"x": [1.0, 2.0]}, timeout=30)
    assert r.status_code == 400 and "rank 1, the model takes rank 2" in r.json()["error"]
