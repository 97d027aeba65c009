"""`imgpipe serve` as a client of TensorFlow Serving's REST API sees it: one real server process
on 127.0.0.1 over a Pusher folder. Its answers equal `imgpipe predict`'s on the same photos; the
hostile files the ingest is tested on get 4xx and the server stays up; a version pushed while a
client keeps asking is swapped in with no failed request, and a broken one is not served."""

import base64
import http.client
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import skimage.data
from PIL import Image

from pipeline.serving.predict import predict
from pipeline.serving.scoring import PredictSettings
from tests.components.conftest import export_model_artifact
from tests.data_prep.hostile_corpus import HOSTILE_CLASS, write_hostile_corpus

pytestmark = pytest.mark.slow
LABELS = ("cat", "dog", "emu")
FIRST, SECOND, BROKEN = 1700000000, 1800000000, 1900000000
NAME = "imgpipe"
PHOTOS = {"astronaut": skimage.data.astronaut, "coffee": skimage.data.coffee}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_model")
    export_model_artifact(root, LABELS)
    return str(root / "Format-Serving")


@pytest.fixture(scope="module")
def server(exported, tmp_path_factory):
    """(base folder, port, the server's stdout lines so far) of a running `imgpipe serve`."""
    base = tmp_path_factory.mktemp("serving") / NAME
    shutil.copytree(exported, base / str(FIRST))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "pipeline.cli", "serve", "--model", str(base)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--poll-seconds", "0.2", "--max-request-bytes", "8000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = process.stdout.readline()
        assert first.startswith("imgpipe serve: http://127.0.0.1:"), process.stderr.read()
        port = int(re.search(r"127\.0\.0\.1:(\d+)/", first).group(1))
        lines = [first]
        threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
        yield base, port, lines
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def call(port: int, method: str, path: str, body=None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = None if body is None else json.dumps(body).encode()
    connection.request(method, path, data, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer


def b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode()}


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """scikit-image's sample photos as a JPEG and as a WebP (the server converts it as the
    ingest does)."""
    folder = tmp_path_factory.mktemp("photos")
    for name, load in PHOTOS.items():
        image = Image.fromarray(load())
        for fmt, extension in (("JPEG", "jpg"), ("WEBP", "webp")):
            buffer = io.BytesIO()
            image.save(buffer, fmt)
            (folder / f"{name}.{extension}").write_bytes(buffer.getvalue())
    return sorted(str(path) for path in folder.iterdir())


def test_status_and_metadata_follow_tf_serving(server):
    _, port, _ = server
    status, answer = call(port, "GET", f"/v1/models/{NAME}")
    assert status == 200
    [version] = answer["model_version_status"]
    assert version["state"] == "AVAILABLE" and int(version["version"]) >= FIRST
    status, answer = call(port, "GET", f"/v1/models/{NAME}/metadata")
    signatures = answer["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == {"serving_default", "serving_images"}
    images = signatures["serving_images"]
    assert images["inputs"]["images"]["dtype"] == "DT_STRING"
    assert set(images["outputs"]) == {"class_ids", "class_names", "probabilities"}
    assert call(port, "GET", "/v1/models/other")[0] == 404
    assert call(port, "GET", f"/v1/models/{NAME}/versions/7")[0] == 404


def test_answers_equal_imgpipe_predict_in_every_form(server, exported, photos):
    _, port, _ = server
    rows = {row.file: row for row in predict(photos, exported, PredictSettings(top_k=3))}
    images = [open(path, "rb").read() for path in photos]
    row_form = {"signature_name": "serving_images", "instances": [b64(x) for x in images]}
    status, rows_answer = call(port, "POST", f"/v1/models/{NAME}:predict", row_form)
    assert status == 200, rows_answer
    columns = {"signature_name": "serving_images", "inputs": {"images": row_form["instances"]}}
    _, columns_answer = call(port, "POST", f"/v1/models/{NAME}:predict", columns)
    examples = {"instances": [{"examples": b64(_example(x))} for x in images]}
    _, examples_answer = call(port, "POST", f"/v1/models/{NAME}:predict", examples)
    assert columns_answer["outputs"]["probabilities"] == [
        p["probabilities"] for p in rows_answer["predictions"]
    ]
    for path, answer, by_example in zip(
        photos, rows_answer["predictions"], examples_answer["predictions"], strict=True
    ):
        expected = rows[path]
        probabilities = np.asarray(answer["probabilities"])
        top = np.argsort(-probabilities, kind="stable")[:3]
        assert [LABELS[i] for i in top] == [name for name, _ in expected.top_k]
        np.testing.assert_allclose(
            probabilities[top], [p for _, p in expected.top_k], rtol=1e-5, atol=1e-6
        )
        assert answer["class_names"] == expected.top_class
        np.testing.assert_allclose(by_example["probabilities"], answer["probabilities"], atol=1e-6)


def _example(image: bytes) -> bytes:
    from components.training.serving_assets import image_example

    return image_example(image)


def test_bad_requests_get_tf_serving_errors_and_hostile_files_a_400(server, tmp_path):
    _, port, _ = server
    path = f"/v1/models/{NAME}:predict"
    cases = [
        ({"instances": [1], "signature_name": "nope"}, 400, 'signature name: "nope" not found'),
        ({"signature_name": "serving_images"}, 400, "Missing 'inputs' or 'instances' key"),
        ({"instances": [b64(b"hello")], "signature_name": "serving_images"}, 400, "not_an_image"),
        ({"instances": [{"b64": "%%%"}], "signature_name": "serving_images"}, 400, "base64"),
    ]
    for body, want, message in cases:
        status, answer = call(port, "POST", path, body)
        assert status == want and message in answer["error"], answer
    assert call(port, "POST", f"/v1/models/{NAME}/versions/5:predict", cases[2][0])[0] == 404
    assert call(port, "POST", "/v1/models/x/y:predict", {})[0] == 400  # a malformed path
    write_hostile_corpus(tmp_path)
    hostile = sorted((tmp_path / HOSTILE_CLASS).iterdir())
    answered = 0
    for file in hostile:
        if file.is_symlink() or not file.is_file():
            continue
        body = {"signature_name": "serving_images", "instances": [b64(file.read_bytes())]}
        status, answer = call(port, "POST", path, body)
        assert status == 200 or 400 <= status < 500, (file.name, answer)
        assert ("predictions" in answer) == (status == 200), answer
        answered += 1
    assert answered > 50
    assert call(port, "GET", f"/v1/models/{NAME}")[0] == 200  # still up


def test_a_body_over_the_limit_gets_413_before_it_is_read(server):
    _, port, _ = server
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.putrequest("POST", f"/v1/models/{NAME}:predict")
    connection.putheader("Content-Length", str(9_000_000))
    connection.endheaders(b"{")
    response = connection.getresponse()
    assert response.status == 413
    assert "over the limit of 8000000 bytes" in json.loads(response.read())["error"]
    connection.close()


def test_a_push_while_a_client_asks_swaps_in_with_no_failed_request(server, photos):
    base, port, lines = server
    body = {"signature_name": "serving_images", "instances": [b64(open(photos[0], "rb").read())]}
    statuses, stop = [], threading.Event()

    def client():
        while not stop.is_set():
            statuses.append(call(port, "POST", f"/v1/models/{NAME}:predict", body)[0])

    asking = threading.Thread(target=client)
    asking.start()
    try:
        staged = base / ".pushing-test"  # as the Pusher does: copied aside, renamed into place
        shutil.copytree(base / str(FIRST), staged)
        os.rename(staged, base / str(SECOND))
        _wait_for_version(port, SECOND)
        broken = base / ".pushing-broken"
        shutil.copytree(base / str(FIRST), broken)
        (broken / "saved_model.pb").write_bytes(b"not a graph")
        os.rename(broken, base / str(BROKEN))
        _wait_for(lambda: any(f"version {BROKEN} does not load" in line for line in lines))
        time.sleep(1)
    finally:
        stop.set()
        asking.join()
    assert len(statuses) > 5 and set(statuses) == {200}
    _, answer = call(port, "GET", f"/v1/models/{NAME}")
    assert [s["version"] for s in answer["model_version_status"]] == [str(SECOND)]
    assert any(f"version {SECOND} serves now" in line for line in lines)


def _wait_for_version(port: int, version: int) -> None:
    def served() -> bool:
        _, answer = call(port, "GET", f"/v1/models/{NAME}")
        return answer["model_version_status"][0]["version"] == str(version)

    _wait_for(served)


def _wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
