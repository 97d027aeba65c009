"""Files an export writes into the SavedModel's assets.extra/ for model servers and clients.

  tf_serving_warmup_requests: PredictionLog records (TFRecord), one single-image request per
    signature. TensorFlow Serving replays them while loading a version, so the first real request
    does not pay for lazy initialization; the serving check replays the same records.
  labels.txt: class names in label-id order (one per line), for top-k answers: the signatures
    return the name of the top class only.
  normalization.json: the per-channel pixel mean and std baked into the signatures, for clients
    that feed the bare network (the TFLite export) and must normalize exactly as it was trained.

Plain TensorFlow and the tensorflow-serving-api protos only: the serving check reads these files
without Keras or TFX, as a model server would.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from components.training.preprocessing import Normalization
from data_prep.contract import features

ASSETS_EXTRA = "assets.extra"
WARMUP_FILE = "tf_serving_warmup_requests"  # the name TensorFlow Serving looks for
LABELS_FILE = "labels.txt"
NORMALIZATION_FILE = "normalization.json"
EXAMPLES_INPUT = "examples"  # serving_default's input
IMAGES_INPUT = "images"  # serving_images' input


def warmup_image(image_size: int) -> bytes:
    """A deterministic JPEG (a colour gradient) of the model's input size."""
    ramp = np.linspace(0, 255, image_size, dtype=np.float32)
    pixels = np.stack(np.broadcast_arrays(ramp[:, None], ramp[None, :], 128.0), axis=-1)
    return tf.io.encode_jpeg(pixels.astype(np.uint8)).numpy()


def image_example(encoded: bytes) -> bytes:
    """A serialized tf.Example carrying only the image: all that serving_default reads."""
    image = tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded]))
    example = tf.train.Example(features=tf.train.Features(feature={features.IMAGE: image}))
    return example.SerializeToString()


def warmup_requests(
    image_size: int, examples_signature: str, images_signature: str
) -> list[prediction_log_pb2.PredictionLog]:
    """One single-image request for each signature."""
    image = warmup_image(image_size)
    inputs = {
        examples_signature: (EXAMPLES_INPUT, image_example(image)),
        images_signature: (IMAGES_INPUT, image),
    }
    logs = []
    for signature, (name, value) in inputs.items():
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(signature_name=signature)
        )
        request.inputs[name].CopyFrom(tf.make_tensor_proto([value], dtype=tf.string))
        logs.append(
            prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
        )
    return logs


def write_serving_assets(
    export_dir: str,
    image_size: int,
    label_names: list[str],
    normalization: Normalization,
    examples_signature: str,
    images_signature: str,
) -> None:
    extra = os.path.join(export_dir, ASSETS_EXTRA)
    tf.io.gfile.makedirs(extra)
    with tf.io.TFRecordWriter(os.path.join(extra, WARMUP_FILE)) as writer:
        for log in warmup_requests(image_size, examples_signature, images_signature):
            writer.write(log.SerializeToString())
    with tf.io.gfile.GFile(os.path.join(extra, LABELS_FILE), "w") as handle:
        handle.write("".join(f"{name}\n" for name in label_names))
    with tf.io.gfile.GFile(os.path.join(extra, NORMALIZATION_FILE), "w") as handle:
        json.dump({"mean": list(normalization.mean), "std": list(normalization.std)}, handle)


def read_warmup_requests(export_dir: str) -> list[prediction_log_pb2.PredictionLog]:
    path = os.path.join(export_dir, ASSETS_EXTRA, WARMUP_FILE)
    return [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(path)
    ]


def read_label_names(export_dir: str) -> list[str]:
    """Class names in label-id order, as the model's probabilities are."""
    path = os.path.join(export_dir, ASSETS_EXTRA, LABELS_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{export_dir} is not an imgpipe export: no {path}")
    with tf.io.gfile.GFile(path) as handle:
        return handle.read().splitlines()


def read_normalization(export_dir: str) -> Normalization:
    """The normalization the export's signatures apply, as the export wrote it."""
    path = os.path.join(export_dir, ASSETS_EXTRA, NORMALIZATION_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{export_dir} has no {path}: exported before it was written")
    with tf.io.gfile.GFile(path) as handle:
        values = json.load(handle)
    return Normalization(tuple(values["mean"]), tuple(values["std"])).validate()


def request_inputs(request: predict_pb2.PredictRequest) -> dict[str, tf.Tensor]:
    """A PredictRequest's inputs as tensors, keyed by input name."""
    return {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
