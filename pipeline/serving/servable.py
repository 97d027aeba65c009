"""One loaded version of a pushed model, as `imgpipe serve` answers with it: its signatures,
their inputs, its metadata in TensorFlow Serving's form, and its warmup.

The model is loaded with tf.saved_model.load alone, as the serving check loads it, and a
version is ready only once it has answered every warmup request in its assets.extra correctly
(the serving check's own test of an answer). Every image a request carries, bare (the image
signature) or inside a tf.Example (serving_default), first goes through the ingest's checks and
conversion in a supervised child bounded in memory and time (data_prep/reading): the model
sees what `imgpipe predict` would give it, and a decompression bomb, a non-image or a file that
crashes a decoder is a 400 naming the problem, never the server's end.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2

from components.serving.serving_probe import replay, saved_model_proto
from components.training.serving_assets import (
    EXAMPLES_INPUT,
    IMAGES_INPUT,
    read_label_names,
    read_warmup_requests,
)
from data_prep.contract import features
from data_prep.reading.image_validation import Accepted, ImageLimits, validate_bounded
from pipeline.serving.rest_api import BAD_REQUEST, ApiError, InputSpec


class NotServable(RuntimeError):
    """The version failed to load or to answer its warmup requests; the message says why."""


@dataclasses.dataclass
class Servable:
    version: int
    model_dir: str
    model: tf.Module
    inputs: dict[str, dict[str, InputSpec]]  # signature -> input name -> spec
    metadata: dict  # the SignatureDefMap as TensorFlow Serving prints it
    load_seconds: float  # the load and the warmup

    def predict(self, signature: str, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The signature's outputs as arrays; a TensorFlow error on the input is an ApiError."""
        try:
            outputs = self.model.signatures[signature](
                **{name: tf.constant(value) for name, value in tensors.items()}
            )
        except (tf.errors.InvalidArgumentError, TypeError, ValueError) as error:
            message = getattr(error, "message", None) or str(error)
            raise ApiError(BAD_REQUEST, message.strip().splitlines()[0]) from None
        return {name: value.numpy() for name, value in outputs.items()}


def load_servable(version: int, model_dir: str) -> Servable:
    """The version loaded and warmed up; raises NotServable."""
    start = time.perf_counter()
    try:
        model = tf.saved_model.load(model_dir)
        meta_graph = saved_model_proto(model_dir).meta_graphs[0]
        label_names = read_label_names(model_dir)
        warmup = read_warmup_requests(model_dir)
    except Exception as error:  # noqa: BLE001  whatever a broken version raises refuses it
        raise NotServable(f"version {version} does not load: {error}") from error
    inputs = {
        name: {
            key: InputSpec(np.dtype(spec.dtype.as_numpy_dtype), _shape(spec))
            for key, spec in function.structured_input_signature[1].items()
        }
        for name, function in model.signatures.items()
    }
    signature_defs = get_model_metadata_pb2.SignatureDefMap()
    for name in inputs:
        signature_defs.signature_def[name].CopyFrom(meta_graph.signature_def[name])
    metadata = json_format.MessageToDict(
        signature_defs, including_default_value_fields=True, preserving_proto_field_name=True
    )
    problems = [] if warmup else ["no warmup requests in assets.extra"]
    for log in warmup:
        problems += replay(model.signatures, log.predict_log.request, label_names).problems
    if problems:
        raise NotServable(f"version {version} fails its warmup: {'; '.join(problems)}")
    return Servable(version, model_dir, model, inputs, metadata, time.perf_counter() - start)


def _shape(spec: tf.TensorSpec) -> tuple[int | None, ...] | None:
    return None if spec.shape.rank is None else tuple(spec.shape.as_list())


def checked_images(tensors: dict[str, np.ndarray], limits: ImageLimits) -> dict[str, np.ndarray]:
    """The tensors with every image (the `images` input, or the image of each `examples`
    tf.Example) checked and converted as the ingest does; raises ApiError (400) naming the
    first one refused."""
    checked = dict(tensors)
    if IMAGES_INPUT in tensors:
        checked[IMAGES_INPUT] = _each(tensors[IMAGES_INPUT], IMAGES_INPUT, limits, _image)
    if EXAMPLES_INPUT in tensors:
        checked[EXAMPLES_INPUT] = _each(tensors[EXAMPLES_INPUT], EXAMPLES_INPUT, limits, _example)
    return checked


def _each(values: np.ndarray, name: str, limits: ImageLimits, check) -> np.ndarray:
    converted = np.empty(values.shape, dtype=object)
    for index, value in np.ndenumerate(values):
        where = f"{name}[{', '.join(map(str, index))}]"
        converted[index] = check(value, where, limits)
    return converted


def _image(data: bytes, where: str, limits: ImageLimits) -> bytes:
    result = validate_bounded(data, limits)
    if not isinstance(result, Accepted):
        raise ApiError(BAD_REQUEST, f"{where} is refused: {result.reason}: {result.detail}")
    return result.encoded


def _example(serialized: bytes, where: str, limits: ImageLimits) -> bytes:
    try:
        example = tf.train.Example.FromString(serialized)
    except Exception:  # noqa: BLE001  the protobuf runtime's decode error type varies
        raise ApiError(BAD_REQUEST, f"{where} is not a serialized tf.Example") from None
    image = example.features.feature[features.IMAGE].bytes_list.value
    if len(image) != 1:
        raise ApiError(BAD_REQUEST, f"{where} carries no single {features.IMAGE!r} bytes feature")
    image[0] = _image(image[0], f"{where} {features.IMAGE!r}", limits)
    return example.SerializeToString()
