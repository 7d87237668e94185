"""ModelService, the part of the Serve wrapper without Ray: request bodies, the checks (with the
Python API's messages), batching of single samples, responses, refused artefacts."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from runtime import export, serving
from runtime.serving import NPZ_TYPE, ModelService, RequestError
from runtime.specialised import load_model
from runtime.target import host_info

from ..runtime.test_untrusted_module import _sections, _write
from .models import INPUT, SHAPE, export_cnn, reference

RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    return export_cnn(str(root / "cnn1.rjit")), export_cnn(str(root / "cnn4.rjit"), batch=4)


@pytest.fixture(scope="module")
def service(paths):
    return ModelService(paths[0])


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _api_error(path: str, **inputs) -> str:
    """What the Python API (compiler.load's run, runtime.specialised) says about these inputs."""
    model = load_model(path)
    with pytest.raises((KeyError, ValueError, TypeError)) as info:
        model.run(inputs)
    return info.value.args[0]


def test_metadata(service):
    meta = service.metadata()
    assert meta["inputs"] == {INPUT: {"shape": [1, *SHAPE], "dtype": "float32"}}
    assert meta["outputs"] == {"output_0": {"shape": [1, 10], "dtype": "float32"}}
    assert meta["batch_size"] == 1 and meta["target"]["cpu"] == host_info().cpu


def test_json_and_npz_requests_give_the_modules_outputs(service, paths):
    x = RNG.standard_normal((1, *SHAPE)).astype("f4")
    expected = reference(paths[0], x)
    for body, content_type in ((json.dumps({INPUT: x.tolist()}).encode(), "application/json"),
                               (_npz(**{INPUT: x}), NPZ_TYPE)):
        arrays = service.decode(body, content_type)
        service.check(arrays)
        outputs = service.run(arrays)
        np.testing.assert_array_equal(outputs[0], expected)
        data, media = service.encode(outputs, content_type, "")
        assert media == content_type
        back = np.load(io.BytesIO(data))["output_0"] if media == NPZ_TYPE else \
            np.array(json.loads(data)["output_0"], dtype="f4")
        np.testing.assert_array_equal(back, expected)
    assert service.encode(outputs, NPZ_TYPE, "application/json")[1] == "application/json"


def test_bad_requests_get_the_python_apis_messages(service, paths):
    good = RNG.standard_normal((1, *SHAPE)).astype("f4")
    cases = [
        (_npz(wrong=good), _api_error(paths[0], wrong=good)),
        (_npz(**{INPUT: good[:, :2]}), _api_error(paths[0], **{INPUT: good[:, :2]})),
        (_npz(**{INPUT: good.astype("f8")}), _api_error(paths[0], **{INPUT: good.astype("f8")})),
        (_npz(**{INPUT: good, "p0": good}), "'p0' is a parameter bound into the model"),
        (_npz(), f"missing input(s) ['{INPUT}']; the model takes {INPUT} (1, 3, 16, 16) float32"),
        (b"PK\x03\x04 not a zip", "not a readable .npz archive"),
    ]
    for body, message in cases:
        with pytest.raises(RequestError) as info:
            service.check(service.decode(body, NPZ_TYPE))
        assert message in str(info.value)
    json_cases = [
        (b"{bad json", "request body is not valid JSON"),
        (b"[1, 2]", "expected a JSON object {input name: nested list of numbers}, got list"),
        (json.dumps({INPUT: [[1, 2], [3]]}).encode(), "not a rectangular nested list"),
        (json.dumps({INPUT: [["a"]]}).encode(), f"input '{INPUT}': expected numbers"),
        (json.dumps({INPUT: good[0].tolist()}).encode(),
         _api_error(paths[0], **{INPUT: good[0]})),
    ]
    for body, message in json_cases:
        with pytest.raises(RequestError) as info:
            service.check(service.decode(body, "application/json"))
        assert message in str(info.value)
    too_big = b" " * (service.max_body_bytes + 1)
    with pytest.raises(RequestError, match="larger than this model's inputs can need"):
        service.decode(too_big, "application/json")


def test_single_samples_are_batched(paths):
    service = ModelService(paths[1])
    assert service.batch_size == 4
    samples = [{INPUT: RNG.standard_normal((1, *SHAPE)).astype("f4")} for _ in range(6)]
    assert all(service.is_sample(s) for s in samples)
    results = service.run_samples(samples)
    assert len(results) == 6
    batch = np.concatenate([s[INPUT] for s in samples[:4]])
    np.testing.assert_array_equal(np.concatenate([r[0] for r in results[:4]]),
                                  reference(paths[1], batch))
    last = np.concatenate([s[INPUT] for s in samples[4:]] + [samples[5][INPUT]] * 2)
    np.testing.assert_array_equal(results[5][0], reference(paths[1], last)[1:2])


def test_artefact_needing_missing_cpu_features_is_refused(paths, tmp_path):
    sections = _sections(paths[0])
    meta = json.loads(sections[3])
    absent = next(f[1:] for f in host_info().features.split(",")
                  if f.startswith("-"))
    meta["features"] += ",+" + absent
    sections[3] = json.dumps(meta).encode()
    edited = str(tmp_path / "edited.rjit")
    _write(edited, sections)
    for load in (ModelService, serving.application):
        with pytest.raises(export.UnsupportedCPUError, match=f"lacks: {absent}; rebuild it"):
            load(edited)
