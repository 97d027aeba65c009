"""TensorFlow Serving's REST bodies: rows and columns in, the same form out, b64 bytes, and a
400 naming what is wrong with a body."""

import base64
import json

import numpy as np
import pytest

from pipeline.serving.rest_api import (
    ApiError,
    InputSpec,
    read_predict_request,
    request_tensors,
    response_body,
)

IMAGES = {"images": InputSpec(np.dtype(object), (None,))}
TWO = {"x": InputSpec(np.dtype("float32"), (None, 2)), "k": InputSpec(np.dtype("int64"), (None,))}


def tensors(body: dict, specs=IMAGES) -> dict:
    return request_tensors(read_predict_request(json.dumps(body).encode()), specs)


def test_rows_and_columns_give_the_same_tensors():
    data = {"b64": base64.b64encode(b"\xff\xd8bytes").decode()}
    for body in (
        {"instances": [data, "text"]},
        {"instances": [{"images": data}, {"images": "text"}]},
        {"inputs": [data, "text"]},
        {"inputs": {"images": [data, "text"]}},
    ):
        assert tensors(body)["images"].tolist() == [b"\xff\xd8bytes", b"text"]
    rows = tensors({"instances": [{"x": [1, 2], "k": 3}, {"x": [3, 4], "k": 5}]}, TWO)
    columns = tensors({"inputs": {"x": [[1, 2], [3, 4]], "k": [3, 5]}}, TWO)
    for name in TWO:
        np.testing.assert_array_equal(rows[name], columns[name])
    assert rows["x"].dtype == np.float32 and rows["k"].dtype == np.int64


@pytest.mark.parametrize(
    "body, message",
    [
        (b"[1, 2]", "not a JSON object"),
        (b"{nope", "JSON Parse error"),
        (b'{"instances": [1], "inputs": [1]}', "only one of 'inputs' or 'instances'"),
        (b'{"instances": []}', "non-empty list"),
        (b'{"instances": [1], "signature_name": 3}', "'signature_name' key must be a string"),
    ],
)
def test_malformed_bodies_are_refused_by_name(body, message):
    with pytest.raises(ApiError, match=message) as raised:
        read_predict_request(body)
    assert raised.value.status == 400


@pytest.mark.parametrize(
    "body, specs, message",
    [
        ({"instances": [{"b64": "%%"}]}, IMAGES, "Unable to base64 decode"),
        ({"instances": [7]}, IMAGES, "a string input takes text"),
        ({"instances": [{"x": [1, 2]}]}, TWO, r"inputs \['k'\] are missing"),
        ({"instances": [{"x": [1, 2], "k": 1}, {"x": [1, 2]}]}, TWO, "instance 1 does not name"),
        ({"inputs": {"x": [[1, 2, 3]], "k": [1]}}, TWO, r"has shape \[1, 3\], the signature"),
        ({"inputs": {"x": [["a", "b"]], "k": [1]}}, TWO, "input 'x'"),
        ({"inputs": [[1, 2]]}, TWO, "'inputs' must name the signature's inputs"),
    ],
)
def test_tensors_that_do_not_fit_the_signature_are_refused_by_name(body, specs, message):
    with pytest.raises(ApiError, match=message) as raised:
        tensors(body, specs)
    assert raised.value.status == 400


def test_answers_mirror_the_form_asked():
    outputs = {
        "class_names": np.array([b"cat", b"dog"], dtype=object),
        "probabilities": np.array([[0.75, 0.25], [0.5, 0.5]], dtype=np.float32),
        "thumb_bytes": np.array([b"\x00\x01", b"\x02"], dtype=object),
    }
    rows = response_body(outputs, row_format=True)["predictions"]
    assert rows[1] == {
        "class_names": "dog",
        "probabilities": [0.5, 0.5],
        "thumb_bytes": {"b64": "Ag=="},
    }
    columns = response_body(outputs, row_format=False)["outputs"]
    assert columns["class_names"] == ["cat", "dog"]
    assert response_body({"p": outputs["probabilities"]}, row_format=True) == {
        "predictions": [[0.75, 0.25], [0.5, 0.5]]
    }
    assert response_body({"p": outputs["probabilities"]}, row_format=False) == {
        "outputs": [[0.75, 0.25], [0.5, 0.5]]
    }
