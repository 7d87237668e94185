"""Serve an exported module over HTTP on Ray Serve: many replicas behind one endpoint.

    POST /           inputs as JSON ({name: nested list}) or an .npz archive (Content-Type
                     application/x-npz); outputs answered the same way ({"output_0": ...}), or
                     as the Accept header asks
    GET  /metadata   inputs and outputs with shapes and dtypes, batch size, target CPU
    GET  /healthz    {"status": "ok"} once the replica has loaded the module

A bad request (unreadable body, unknown or missing input, wrong shape or dtype) is answered
with HTTP 400 and the message the Python API (compiler.load's run: runtime.specialised) gives
for it. Each replica loads the module once, from the bytes the driver read (so the file need
not exist on the other machines of a cluster), and runs its kernels on its own thread count.
A model compiled for a batch size B > 1 (every input and output leading with B) also takes
single-sample requests (leading dimension 1) and groups them into batches of up to B with
`serve.batch`. A model with dynamic axes (a dynamic artefact, loaded with the compiler's
loader, as `relayjit serve` does) takes requests of any valid shape: each replica compiles a
shape the first time it meets it and keeps the executors of the recent ones.

ModelService is the part without Ray (decode, check, run, encode); Ray is an optional
dependency (`pip install relayjit[serve]`), imported only by the functions that need it.
"""
from __future__ import annotations

import functools
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

from . import threadpool
from .errors import KernelError
from .specialised import SpecialisedModel, TensorSpec, bind_signature, load_model
from .target import host_info

__all__ = ["ModelService", "RequestError", "Server", "JSON_TYPE", "NPZ_TYPE", "application",
           "start"]

JSON_TYPE = "application/json"
NPZ_TYPE = "application/x-npz"
_MAX_BODY_SLACK = 1 << 20  # request bodies may exceed 32 bytes per input element by this much
MAX_DYNAMIC_BODY_BYTES = 256 << 20  # a model with dynamic axes: no size to derive it from


class RequestError(ValueError):
    """A request the model cannot take; answered with HTTP 400 and this message."""


class ModelService:
    """One loaded model answering requests: what a serving replica holds. The model is a
    runtime.specialised.SpecialisedModel: `loader(path)` gives it (default: load_model, a
    static or VM module; compiler.tools.session.load_model also builds dynamic artefacts and
    ONNX files per input shape, so requests of any valid length are served)."""

    def __init__(self, path: str | os.PathLike, threads: int | None = None,
                 loader: Callable[[str], SpecialisedModel] | None = None) -> None:
        self.model = (loader or load_model)(os.fspath(path))
        if threads is not None:
            threadpool.set_num_threads(threads)
        self.target = self.model.target or host_info()
        self.inputs = {s.name: (s.shape, s.dtype) for s in self.model.inputs}
        self.outputs = [(o.shape, o.dtype) for o in self.model.outputs]
        static = all(s.is_static for s in self.model.inputs)
        self.batch_size = _batch_size([*self.inputs.values(), *self.outputs]) if static else 1
        self.bound_params = _bound_params(self.model)
        if static:
            element_bytes = sum(int(np.prod(shape)) for shape, _ in self.inputs.values())
            self.max_body_bytes = 32 * element_bytes + _MAX_BODY_SLACK
        else:  # the inputs' sizes are known per request only
            self.max_body_bytes = MAX_DYNAMIC_BODY_BYTES

    @classmethod
    def from_bytes(cls, module_bytes: bytes, threads: int | None = None,
                   loader: Callable[[str], SpecialisedModel] | None = None) -> ModelService:
        """A service for a module file's contents (what travels to replicas and actors)."""
        with tempfile.NamedTemporaryFile(suffix=".rjit") as f:
            f.write(module_bytes)
            f.flush()
            return cls(f.name, threads, loader)

    # ---- what the model takes and gives ---------------------------------------------------

    def metadata(self) -> dict:
        """Inputs and outputs ({name: {"shape", "dtype"}}; a dynamic dim by its name, or
        null), batch size and target CPU."""
        def spec(shape, dtype):
            return {"shape": None if shape is None else list(shape), "dtype": dtype}
        return {
            "inputs": {name: spec(*sd) for name, sd in self.inputs.items()},
            "outputs": {_output_name(i): spec(*sd) for i, sd in enumerate(self.outputs)},
            "batch_size": self.batch_size,
            "threads": threadpool.get_num_threads(),
            "target": self.target._asdict(),
        }

    def is_sample(self, arrays: dict[str, np.ndarray]) -> bool:
        """True when the request is one sample of a batched model (every input leads with 1)."""
        return self.batch_size > 1 and all(a.ndim >= 1 and a.shape[0] == 1
                                           for a in arrays.values())

    # ---- requests -------------------------------------------------------------------------

    def decode(self, body: bytes, content_type: str) -> dict[str, np.ndarray]:
        """The input arrays of a request body (JSON or .npz); RequestError."""
        if len(body) > self.max_body_bytes:
            raise RequestError(f"request body of {len(body)} bytes is larger than this model's "
                               f"inputs can need ({self.max_body_bytes} bytes at most)")
        if _media_type(content_type) in (NPZ_TYPE, "application/octet-stream"):
            return self._decode_npz(body)
        return self._decode_json(body)

    def _decode_json(self, body: bytes) -> dict[str, np.ndarray]:
        try:
            doc = json.loads(body)
        except (UnicodeDecodeError, ValueError) as err:
            raise RequestError(f"request body is not valid JSON: {err}") from None
        if not isinstance(doc, dict):
            raise RequestError(f"expected a JSON object {{input name: nested list of numbers}}, "
                               f"got {type(doc).__name__}")
        arrays = {}
        for name, value in doc.items():
            try:
                array = np.array(value)
            except ValueError:
                raise RequestError(f"input {name!r}: not a rectangular nested list of "
                                   "numbers") from None
            if array.dtype.kind not in "biuf":
                raise RequestError(f"input {name!r}: expected numbers, got {array.dtype.kind!r}"
                                   f" values like {value!r:.40}")
            wanted = self.inputs.get(name, (None, None))[1]
            # JSON has no dtypes: numbers take the input's dtype when it holds their kind
            if wanted is not None and np.can_cast(array.dtype, wanted, "same_kind"):
                array = array.astype(wanted)
            arrays[name] = array
        return arrays

    def _decode_npz(self, body: bytes) -> dict[str, np.ndarray]:
        try:
            with zipfile.ZipFile(io.BytesIO(body)) as archive:
                unpacked = sum(info.file_size for info in archive.infolist())
            if unpacked > self.max_body_bytes:
                raise RequestError(f".npz archive unpacks to {unpacked} bytes, more than this "
                                   f"model's inputs can need ({self.max_body_bytes})")
            with np.load(io.BytesIO(body), allow_pickle=False) as npz:
                return {name: npz[name] for name in npz.files}
        except RequestError:
            raise
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
            raise RequestError(f"request body is not a readable .npz archive: {err}") from None

    def _check_params(self, arrays: dict[str, np.ndarray]) -> None:
        for name in arrays:
            if name in self.bound_params:
                raise RequestError(f"input {name!r} is a parameter bound into the model, "
                                   f"not a request input; inputs are {list(self.inputs)}")

    def check(self, arrays: dict[str, np.ndarray]) -> None:
        """Names, shapes and dtypes against the model's (one sample's, for is_sample requests);
        RequestError with the message compiler.load's run gives (runtime.specialised)."""
        self._check_params(arrays)
        specs = self.model.inputs
        if self.is_sample(arrays):
            specs = [TensorSpec(s.name, (1, *s.shape[1:]), s.dtype) for s in specs]
        try:
            bind_signature(specs, arrays)
        except (KeyError, TypeError, ValueError) as err:
            raise RequestError(err.args[0]) from None

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs for a checked full-size request (a new shape of a dynamic model is
        compiled first)."""
        return self.model.run(arrays)

    def run_samples(self, samples: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
        """Outputs per checked sample, run batch_size samples at a time (the last batch padded
        with copies of its last sample)."""
        results: list[list[np.ndarray]] = []
        for start in range(0, len(samples), self.batch_size):
            chunk = samples[start:start + self.batch_size]
            padded = chunk + [chunk[-1]] * (self.batch_size - len(chunk))
            batch = {name: np.concatenate([s[name] for s in padded]) for name in self.inputs}
            outputs = self.run(batch)
            results.extend([out[k:k + 1] for out in outputs] for k in range(len(chunk)))
        return results

    def encode(self, outputs: list[np.ndarray], content_type: str, accept: str) -> tuple[bytes,
                                                                                          str]:
        """(body, media type) of a response: what Accept asks for, else the request's type."""
        wanted = _media_type(accept)
        if wanted not in (JSON_TYPE, NPZ_TYPE):
            wanted = NPZ_TYPE if _media_type(content_type) == NPZ_TYPE else JSON_TYPE
        named = {_output_name(i): out for i, out in enumerate(outputs)}
        if wanted == NPZ_TYPE:
            buffer = io.BytesIO()
            np.savez(buffer, **named)
            return buffer.getvalue(), NPZ_TYPE
        return json.dumps({n: out.tolist() for n, out in named.items()}).encode(), JSON_TYPE


def _output_name(index: int) -> str:
    return f"output_{index}"


def _media_type(header: str | None) -> str:
    return (header or "").split(";")[0].split(",")[0].strip().lower()


def _bound_params(model: SpecialisedModel) -> set[str]:
    """Names of params bound into a graph module (a request may not set them)."""
    return {name for module in model.modules() for name in getattr(module, "params", ())}


def _batch_size(specs: list[tuple[tuple[int, ...], str]]) -> int:
    """B when every shape leads with the same B > 1 (the model batches), else 1."""
    leading = {shape[0] if shape else 1 for shape, _ in specs}
    return leading.pop() if len(leading) == 1 and min(leading) > 1 else 1


@functools.lru_cache(maxsize=1)
def _deployment_class():
    """The Ray Serve deployment wrapping a ModelService (built once Ray is needed)."""
    from ray import serve
    from starlette.responses import Response

    def _json_response(status: int, payload: Any) -> Response:
        return Response(json.dumps(payload), status_code=status, media_type=JSON_TYPE)

    @serve.deployment(name="relayjit", max_ongoing_requests=64)
    class RelayjitModel:
        def __init__(self, module_bytes: bytes, threads: int, loader) -> None:
            self.service = ModelService.from_bytes(module_bytes, threads, loader)
            if self.service.batch_size > 1:
                self.run_batch.set_max_batch_size(self.service.batch_size)

        async def __call__(self, request) -> Response:
            path = request.url.path.rstrip("/")
            if request.method == "GET" and path.endswith("/metadata"):
                return _json_response(200, self.service.metadata())
            if request.method == "GET" and path.endswith("/healthz"):
                return _json_response(200, {"status": "ok"})
            if request.method != "POST":
                return _json_response(404, {"error": f"no {request.method} {path or '/'}; "
                                           "POST inputs to /, GET /metadata or /healthz"})
            content_type = request.headers.get("content-type", JSON_TYPE)
            try:
                arrays = self.service.decode(await request.body(), content_type)
                self.service.check(arrays)
                if self.service.is_sample(arrays):
                    outputs = await self.run_batch(arrays)
                else:  # no await between setting inputs and reading outputs: one at a time
                    outputs = self.service.run(arrays)
            except RequestError as err:
                return _json_response(400, {"error": str(err)})
            except KernelError as err:
                return _json_response(500, {"error": str(err)})
            body, media_type = self.service.encode(outputs, content_type,
                                                   request.headers.get("accept", ""))
            return Response(body, media_type=media_type)

        @serve.batch(max_batch_size=2, batch_wait_timeout_s=0.005)
        async def run_batch(self, samples: list[dict]) -> list[list[np.ndarray]]:
            return self.service.run_samples(samples)

        def check_health(self) -> None:
            if not self.service.model.inputs and not self.service.model.outputs:
                raise RuntimeError("the loaded model has neither inputs nor outputs")

    return RelayjitModel


def application(path: str | os.PathLike, replicas: int = 1, threads: int = 1,
                num_cpus: float | None = None,
                loader: Callable[[str], SpecialisedModel] | None = None):
    """A Ray Serve application serving the module at `path` (checked here first): `replicas`
    replicas, each loading it with `loader` (see ModelService), running kernels on `threads`
    threads and reserving `num_cpus` CPUs (default: threads)."""
    if replicas < 1 or threads < 1:
        raise ValueError(f"replicas and threads must be >= 1, got {replicas} and {threads}")
    (loader or load_model)(os.fspath(path))  # a bad file fails here, not in the replicas
    with open(path, "rb") as f:
        data = f.read()
    options = {"num_cpus": threads if num_cpus is None else num_cpus}
    return _deployment_class().options(num_replicas=replicas,
                                       ray_actor_options=options).bind(data, threads, loader)


class Server:
    """A running application (from start); stop() removes it."""

    def __init__(self, url: str, name: str, started_ray: bool, owns_cluster: bool) -> None:
        self.url, self.name = url, name
        self.started_ray, self.owns_cluster = started_ray, owns_cluster

    def stop(self) -> None:
        """Remove the application; shut Serve and Ray down when start() started Ray here (a
        joined cluster keeps running, this process only disconnects)."""
        import ray
        from ray import serve

        if self.owns_cluster:
            serve.shutdown()
        else:
            serve.delete(self.name)
        if self.started_ray:
            ray.shutdown()


def start(path: str | os.PathLike, replicas: int = 1, port: int = 8000, threads: int = 1,
          address: str | None = None, host: str = "127.0.0.1", name: str = "relayjit",
          num_cpus: float | None = None,
          loader: Callable[[str], SpecialisedModel] | None = None) -> Server:
    """Serve the module at `path` with `replicas` replicas on a local Ray instance (or the
    cluster at `address`: "auto" or "ray://host:port"), listening on host:port."""
    app = application(path, replicas, threads, num_cpus, loader)  # checks the file first
    import ray
    from ray import serve

    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=address, include_dashboard=False, logging_level="warning")
    server = Server(f"http://{host}:{port}/", name, started_ray, started_ray and address is None)
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(app, name=name, route_prefix="/")
    except BaseException:
        server.stop()
        raise
    return server
