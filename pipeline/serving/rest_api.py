"""TensorFlow Serving's REST request and response bodies, as its REST API documentation defines
them, for `imgpipe serve` (pipeline/serving/server.py).

A :predict body names an optional `signature_name` and its tensors in one of two forms: row
(`instances`: a list, one element per example, each a value or an object of named inputs) or
columnar (`inputs`: a value or an object of named inputs, batch first). A string input takes
UTF-8 text or `{"b64": "..."}` bytes. Answers mirror the form asked: `predictions` (a list of
rows) or `outputs`. A failure is `{"error": "..."}` with the HTTP status TensorFlow Serving gives
the gRPC code behind it (INVALID_ARGUMENT and FAILED_PRECONDITION 400, NOT_FOUND 404,
UNAVAILABLE 503, INTERNAL 500); a body over the server's limit is 413.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json

import numpy as np

BAD_REQUEST, NOT_FOUND, TOO_LARGE, INTERNAL, UNAVAILABLE = 400, 404, 413, 500, 503
DEFAULT_SIGNATURE = "serving_default"
B64 = "b64"
BYTES_OUTPUT_SUFFIX = "_bytes"  # string outputs TensorFlow Serving answers as {"b64": ...}


class ApiError(Exception):
    """A request that gets TensorFlow Serving's error body and an HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status

    def body(self) -> dict:
        return {"error": str(self)}


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """One signature input: its dtype (numpy's, object for strings) and shape (None: any)."""

    dtype: np.dtype
    shape: tuple[int | None, ...] | None


@dataclasses.dataclass(frozen=True)
class PredictRequest:
    signature_name: str
    row_format: bool  # `instances` (answered as `predictions`), else `inputs` (`outputs`)
    payload: object  # the `instances` list or the `inputs` value


def read_predict_request(body: bytes) -> PredictRequest:
    """The parsed body of a :predict request; raises ApiError (400) naming what is wrong."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise ApiError(BAD_REQUEST, f"JSON Parse error: {error}") from None
    if not isinstance(request, dict):
        raise ApiError(BAD_REQUEST, "JSON Parse error: the body is not a JSON object")
    signature = request.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature, str):
        raise ApiError(BAD_REQUEST, "'signature_name' key must be a string")
    forms = [key for key in ("instances", "inputs") if key in request]
    if not forms:
        raise ApiError(BAD_REQUEST, "Missing 'inputs' or 'instances' key")
    if len(forms) == 2:
        raise ApiError(
            BAD_REQUEST,
            "Not formatted correctly expecting only one of 'inputs' or 'instances' keys exists",
        )
    payload = request[forms[0]]
    if forms[0] == "instances" and (not isinstance(payload, list) or not payload):
        raise ApiError(BAD_REQUEST, "Expecting 'instances' to be a non-empty list/array")
    return PredictRequest(signature or DEFAULT_SIGNATURE, forms[0] == "instances", payload)


def request_tensors(request: PredictRequest, specs: dict[str, InputSpec]) -> dict[str, np.ndarray]:
    """The request's tensors by input name, each checked against the signature's spec."""
    if request.row_format:
        columns = _columns_of_rows(request.payload, list(specs))
    elif _is_named(request.payload):
        columns = request.payload
    elif len(specs) == 1:
        columns = {next(iter(specs)): request.payload}
    else:
        raise ApiError(BAD_REQUEST, f"'inputs' must name the signature's inputs: {sorted(specs)}")
    unknown = sorted(set(columns) - set(specs))
    missing = sorted(set(specs) - set(columns))
    if unknown or missing:
        raise ApiError(
            BAD_REQUEST,
            f"inputs {unknown or missing} {'are not' if unknown else 'are missing from'} the "
            f"signature's inputs {sorted(specs)}",
        )
    return {name: _tensor(name, columns[name], specs[name]) for name in specs}


def _is_named(value) -> bool:
    return isinstance(value, dict) and set(value) != {B64}


def _columns_of_rows(rows: list, names: list[str]) -> dict[str, list]:
    if not all(_is_named(row) for row in rows):
        if len(names) != 1:
            raise ApiError(
                BAD_REQUEST,
                f"each instance must be an object naming the signature's inputs {names}",
            )
        return {names[0]: rows}
    columns: dict[str, list] = {}
    for index, row in enumerate(rows):
        if not _is_named(row) or (columns and set(row) != set(columns)):
            raise ApiError(
                BAD_REQUEST, f"instance {index} does not name the same inputs as instance 0"
            )
        for name, value in row.items():
            columns.setdefault(name, []).append(value)
    return columns


def _tensor(name: str, value, spec: InputSpec) -> np.ndarray:
    try:
        if spec.dtype == np.object_:
            array = np.asarray(_strings(value), dtype=object)
        else:
            array = np.asarray(value, dtype=spec.dtype)
    except (TypeError, ValueError, OverflowError) as error:
        raise ApiError(BAD_REQUEST, f"input {name!r}: {error}") from None
    if spec.shape is not None and (
        len(spec.shape) != array.ndim
        or any(
            want is not None and want != got
            for want, got in zip(spec.shape, array.shape, strict=True)
        )
    ):
        shape = [-1 if dim is None else dim for dim in spec.shape]
        raise ApiError(
            BAD_REQUEST, f"input {name!r} has shape {list(array.shape)}, the signature {shape}"
        )
    return array


def _strings(value):
    """Nested lists of text or {"b64": ...} objects as nested lists of bytes."""
    if isinstance(value, list):
        return [_strings(item) for item in value]
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and set(value) == {B64} and isinstance(value[B64], str):
        try:
            return base64.b64decode(value[B64], validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(BAD_REQUEST, "Unable to base64 decode") from None
    raise ApiError(BAD_REQUEST, f"a string input takes text or {{'b64': ...}}, not {value!r:.60}")


def response_body(outputs: dict[str, np.ndarray], row_format: bool) -> dict:
    """The answer in the request's form: `predictions` rows, or `outputs` columns."""
    columns = {name: _json_value(name, array) for name, array in outputs.items()}
    if not row_format:
        return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}
    sizes = {len(column) for column in columns.values() if isinstance(column, list)}
    if len(sizes) != 1 or len(columns) != sum(isinstance(c, list) for c in columns.values()):
        raise ApiError(
            BAD_REQUEST, "the outputs have different batch sizes: ask in the columnar form"
        )
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    (size,) = sizes
    return {
        "predictions": [{name: column[i] for name, column in columns.items()} for i in range(size)]
    }


def _json_value(name: str, array: np.ndarray):
    if array.dtype == object or array.dtype.kind == "S":
        as_b64 = name.endswith(BYTES_OUTPUT_SUFFIX)
        return _mapped(
            array.tolist(),
            lambda item: (
                {B64: base64.b64encode(item).decode()} if as_b64 else item.decode(errors="replace")
            ),
        )
    return array.tolist()


def _mapped(value, function):
    if isinstance(value, list):
        return [_mapped(item, function) for item in value]
    return function(value)
