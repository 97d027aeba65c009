"""TFLiteExport: float32, float16 and int8 TFLite models of the trained classifier, each scored on
the eval split against the SavedModel it came from, measured (size, single-image latency), and
the int8 model refused when it loses more accuracy than the pipeline allows.

The SavedModel's answers are not recomputed: EvaluationReportGen scored the eval split once and
stored every example's probabilities; the TFLite models run on the same examples (checked by
source path, in the same order) and are compared with those.

The TFLite models take decoded pixels: float32 [batch, size, size, 3] RGB in 0..255, already
resized to the model's input size (what an app gets from the platform's image decoder), and
return float32 probabilities [batch, classes] in label-id order; normalization is inside them.
The int8 model is full-integer: every op runs in int8, calibrated on train-split images; it takes
the same pixels as uint8 and returns uint8 probabilities (the report gives each tensor's scale
and zero point).
Decoding and antialiased resizing are not TFLite builtin ops, so the full bytes -> probabilities
signature does not convert; the report names the ops it refuses (IMAGES_SIGNATURE_REFUSED_OPS,
which a test keeps true by converting that signature), instead of every export re-trying a
conversion known to fail.
"""

import json
import os
import time
import warnings

import numpy as np
import tensorflow as tf
import tf_keras as keras
from apache_beam.io.filesystems import FileSystems
from tensorflow.lite.python.convert_phase import ConverterError
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import path_utils

from components.artifacts import EvaluationReport, TFLiteModel
from components.evaluation.eval_split import read_batches, split_files
from components.evaluation.evaluation_report import EvalScores, read_scores
from components.training.export import IMAGES_SIGNATURE, rebuild_keras_model
from components.training.preprocessing import CHANNELS, Normalization, decode_and_resize, normalize
from components.training.serving_assets import read_normalization
from data_prep.runtime.cores import usable_cores

FILES = {
    "float32": "model_float32.tflite",
    "float16": "model_float16.tflite",
    "int8": "model_int8.tflite",
}
REPORT_FILE = "tflite_report.json"
PIXELS_INPUT = "pixels"
# Train images the int8 converter calibrates its activation ranges on: TensorFlow's guide asks
# for a few hundred; more only lengthens the conversion.
REPRESENTATIVE_IMAGES = 200
LATENCY_REQUESTS = 100  # one-image invocations timed per model
# The ops TFLite refuses in an exported model's IMAGES_SIGNATURE: decoding and antialiased
# resizing (tests/components/serving/test_tflite_export.py converts that signature to keep this
# true).
IMAGES_SIGNATURE_REFUSED_OPS = ("tf.DecodeImage", "tf.ScaleAndTranslate")


def pixels_function(model: keras.Model, image_size: int, normalization: Normalization):
    """Resized RGB pixels (0..255) -> probabilities: the model with its normalization.

    Traced without autograph: the model and the normalization are plain graph code with no
    Python control flow to convert, and autograph would transpile the source of every Keras
    layer's call, most of the export's time."""

    @tf.function(
        autograph=False,
        input_signature=[
            tf.TensorSpec([None, image_size, image_size, CHANNELS], tf.float32, name=PIXELS_INPUT)
        ],
    )
    def classify(pixels):
        return {"probabilities": model(normalize(pixels, normalization), training=False)}

    return classify.get_concrete_function()


def convert(
    function, model: keras.Model, quantization: str, representative: np.ndarray | None = None
) -> bytes:
    """A builtin-ops TFLite flatbuffer; 'float16' stores the weights as float16; 'int8' is
    full-integer (int8 ops only, uint8 pixels in, uint8 probabilities out), its activation
    ranges calibrated on `representative` pixels [n, size, size, 3].

    The concrete function is frozen and converted directly: by default the converter first
    saves `model` with the function as a temporary SavedModel, and saving a Keras model traces
    every layer's call again, most of each conversion's time."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], model)
    converter.experimental_lower_to_saved_model = False
    if quantization == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif quantization == "int8":
        if representative is None or not len(representative):
            raise ValueError("an int8 conversion needs representative pixels to calibrate on")
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([image[np.newaxis]] for image in representative)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.uint8
        converter.inference_output_type = tf.uint8
    with warnings.catch_warnings():
        # The converter asks for input statistics of a quantized input; calibration on the
        # representative images provides them, and TensorFlow warns without looking.
        warnings.filterwarnings("ignore", "Statistics for quantized inputs were expected")
        return converter.convert()


def refused_ops(error: ConverterError) -> list[str]:
    names = {found.operator.name for found in error.errors if found.operator.name}
    return sorted(names) or [str(error).splitlines()[0]]


def convert_all(
    function, model: keras.Model, representative: np.ndarray
) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """Every quantization that converts, and the refused ops of each that does not: a model
    TFLite cannot express still gets served and pushed, with the reason in the report."""
    converted, failed = {}, {}
    for name in FILES:
        try:
            converted[name] = convert(function, model, name, representative)
        except ConverterError as error:
            failed[name] = refused_ops(error)
    return converted, failed


def _quantize(values: np.ndarray, detail: dict) -> np.ndarray:
    """Float values as the tensor's dtype: quantized by its scale and zero point if integer."""
    dtype = detail["dtype"]
    if not np.issubdtype(dtype, np.integer):
        return values.astype(dtype)
    scale, zero_point = detail["quantization"]
    limits = np.iinfo(dtype)
    return np.clip(np.round(values / scale + zero_point), limits.min, limits.max).astype(dtype)


def _dequantize(values: np.ndarray, detail: dict) -> np.ndarray:
    if not np.issubdtype(detail["dtype"], np.integer):
        return values
    scale, zero_point = detail["quantization"]
    return (values.astype(np.float32) - zero_point) * scale


def tensor_types(flatbuffer: bytes) -> dict:
    """The model's input and output dtype, and scale and zero point where quantized."""
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    found = {}
    for role, [detail] in (
        ("input", interpreter.get_input_details()),
        ("output", interpreter.get_output_details()),
    ):
        found[role] = {"dtype": np.dtype(detail["dtype"]).name}
        if np.issubdtype(detail["dtype"], np.integer):
            scale, zero_point = detail["quantization"]
            found[role].update(scale=float(scale), zero_point=int(zero_point))
    return found


def tflite_probabilities(flatbuffer: bytes, pixels: np.ndarray) -> np.ndarray:
    """The TFLite model's float probabilities for float `pixels` (quantized in and out for the
    int8 model), on every usable core: the interpreter's default is one thread; more threads
    give the same probabilities sooner."""
    interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=usable_cores())
    [input_detail] = interpreter.get_input_details()
    interpreter.resize_tensor_input(input_detail["index"], pixels.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(input_detail["index"], _quantize(pixels, input_detail))
    interpreter.invoke()
    [output_detail] = interpreter.get_output_details()
    return _dequantize(interpreter.get_tensor(output_detail["index"]), output_detail)


def single_image_latency(
    flatbuffer: bytes, image_size: int, requests: int = LATENCY_REQUESTS
) -> dict[str, float]:
    """p50 and p99 milliseconds of one-image invocations on one thread (the interpreter's
    default, what an app gets), after one untimed invocation."""
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    interpreter.allocate_tensors()
    [input_detail] = interpreter.get_input_details()
    pixels = np.random.default_rng(0).uniform(0, 255, (1, image_size, image_size, CHANNELS))
    interpreter.set_tensor(input_detail["index"], _quantize(pixels, input_detail))
    interpreter.invoke()
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        interpreter.invoke()
        times.append((time.perf_counter() - start) * 1000)
    return {"p50": float(np.percentile(times, 50)), "p99": float(np.percentile(times, 99))}


def batch_decoder(image_size: int):
    """Encoded images [n] -> resized pixels [n, size, size, 3] by the training preprocessing, as
    one graph: an eager map_fn runs a Python step per image, several times the decode's own
    cost. No autograph, as in pixels_function: nothing in it to convert."""

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])
    def decode(images):
        return tf.map_fn(
            lambda encoded: decode_and_resize(encoded, image_size),
            images,
            fn_output_signature=tf.TensorSpec([image_size, image_size, CHANNELS], tf.float32),
        )

    return decode


def compare_on_split(
    scores: EvalScores, flatbuffers: dict[str, bytes], files: list[str], image_size: int
) -> dict:
    """Accuracy of the SavedModel (its stored scores) and of each TFLite model on the same
    images, decoded and resized by the training preprocessing; `files` must hold exactly the
    examples that were scored, in the same order."""
    reference_labels = scores.probabilities.argmax(1)
    correct = dict.fromkeys(flatbuffers, 0)
    agree = dict.fromkeys(flatbuffers, 0)
    max_difference = dict.fromkeys(flatbuffers, 0.0)
    total = 0
    decode = batch_decoder(image_size)
    for batch in read_batches(files):
        rows = slice(total, total + len(batch.labels))
        if batch.source_paths != scores.source_paths[rows]:
            raise ValueError(
                "the stored eval scores do not belong to these examples: from example "
                f"{total} on, the split has {batch.source_paths[:1]}, the scores "
                f"{scores.source_paths[rows][:1]}"
            )
        pixels = decode(batch.images).numpy()
        reference = scores.probabilities[rows]
        total += len(batch.labels)
        for name, flatbuffer in flatbuffers.items():
            found = tflite_probabilities(flatbuffer, pixels)
            correct[name] += int(np.sum(found.argmax(1) == batch.labels))
            agree[name] += int(np.sum(found.argmax(1) == reference_labels[rows]))
            max_difference[name] = max(max_difference[name], float(np.abs(found - reference).max()))
    if total != len(scores.source_paths):
        raise ValueError(
            f"the stored eval scores do not belong to these examples: {len(scores.source_paths)} "
            f"were scored, the split has {total}"
        )
    accuracy = {
        "saved_model": float(np.mean(reference_labels == scores.labels)),
        **{name: count / total for name, count in correct.items()},
    }
    return {
        "examples": total,
        "accuracy": accuracy,
        "accuracy_gap_points": {
            name: 100 * (accuracy["saved_model"] - accuracy[name]) for name in flatbuffers
        },
        "top1_agreement": {name: count / total for name, count in agree.items()},
        "max_abs_probability_difference": max_difference,
    }


def representative_pixels(
    files: list[str], image_size: int, count: int = REPRESENTATIVE_IMAGES
) -> np.ndarray:
    """The first `count` images of `files` as the models' input pixels [n, size, size, 3]: what
    the int8 converter calibrates on."""
    decode, found, total = batch_decoder(image_size), [], 0
    for batch in read_batches(files):
        found.append(decode(batch.images[: count - total]).numpy())
        total += len(found[-1])
        if total == count:
            break
    return np.concatenate(found)


def int8_refusal(compared: dict, max_gap_points: float) -> str | None:
    """Why the int8 model is refused (its accuracy falls more than `max_gap_points` below the
    SavedModel's on the eval split), or None when it is kept or was not converted."""
    gap = compared["accuracy_gap_points"].get("int8")
    if gap is None or gap <= max_gap_points:
        return None
    accuracy = compared["accuracy"]
    return (
        f"int8 accuracy {accuracy['int8']:.4f} is {gap:.2f} points below the SavedModel's "
        f"{accuracy['saved_model']:.4f}, more than int8_max_accuracy_gap_points "
        f"({max_gap_points:g}); the float models are kept"
    )


@component
def TFLiteExport(  # noqa: N802  TFX component names are classes
    model: InputArtifact[standard_artifacts.Model],
    examples: InputArtifact[standard_artifacts.Examples],
    readable_evaluation: InputArtifact[EvaluationReport],
    tflite: OutputArtifact[TFLiteModel],
    eval_split: Parameter[str] = "eval",
    train_split: Parameter[str] = "train",
    int8_max_accuracy_gap_points: Parameter[float] = 1.0,
) -> None:
    """Converts the model to float32, float16 and int8 TFLite (int8 calibrated on
    `train_split`), scores each on `eval_split` against the SavedModel's stored scores
    (readable_evaluation, which scored the same split) and times one-image invocations; writes
    the .tflite files and tflite_report.json. An int8 model more than
    `int8_max_accuracy_gap_points` below the SavedModel is not written, and the report says why.
    """
    saved_model_dir = path_utils.serving_model_path(model.uri)
    keras_model = rebuild_keras_model(saved_model_dir)
    image_size = int(keras_model.input_shape[1])
    normalization = read_normalization(saved_model_dir)
    function = pixels_function(keras_model, image_size, normalization)
    representative = representative_pixels(split_files(examples, train_split), image_size)
    flatbuffers, failed = convert_all(function, keras_model, representative)
    compared = compare_on_split(
        read_scores(readable_evaluation.uri),
        flatbuffers,
        split_files(examples, eval_split),
        image_size,
    )
    refused = {}
    if (reason := int8_refusal(compared, int8_max_accuracy_gap_points)) is not None:
        refused["int8"] = reason
    kept = {name: flatbuffer for name, flatbuffer in flatbuffers.items() if name not in refused}
    for name, flatbuffer in kept.items():
        with FileSystems.create(os.path.join(tflite.uri, FILES[name])) as handle:
            handle.write(flatbuffer)
    report = {
        "files": {name: FILES[name] for name in kept},
        "conversion_failed": failed,
        "refused": refused,
        "input": {
            "name": PIXELS_INPUT,
            "dtype": "float32",
            "shape": [None, image_size, image_size, CHANNELS],
            "meaning": "RGB pixels in 0..255, resized to the input size (antialiased bilinear)",
        },
        "output": {"name": "probabilities", "dtype": "float32", "meaning": "label-id order"},
        "tensor_types": {name: tensor_types(flatbuffer) for name, flatbuffer in kept.items()},
        "bytes": {name: len(flatbuffer) for name, flatbuffer in flatbuffers.items()},
        "latency_ms": {
            name: single_image_latency(flatbuffer, image_size)
            for name, flatbuffer in flatbuffers.items()
        },
        "calibration_images": len(representative),
        "not_convertible": {
            "signature": IMAGES_SIGNATURE,
            "ops": list(IMAGES_SIGNATURE_REFUSED_OPS),
            "note": "the TFLite models start after decoding and resizing; an app decodes and "
            "resizes with its platform's image library",
        },
        "eval": compared,
    }
    with FileSystems.create(os.path.join(tflite.uri, REPORT_FILE)) as handle:
        handle.write(json.dumps(report, indent=2).encode())
    for name, gap in compared["accuracy_gap_points"].items():
        tflite.set_float_custom_property(f"{name}_accuracy_gap_points", gap)
        tflite.set_int_custom_property(f"{name}_bytes", report["bytes"][name])
        tflite.set_float_custom_property(
            f"{name}_latency_p50_ms", report["latency_ms"][name]["p50"]
        )
    if refused:
        tflite.set_string_custom_property("int8_refused", refused["int8"])
    tflite.set_float_custom_property("saved_model_accuracy", compared["accuracy"]["saved_model"])
