"""TFLiteExport: float32 and float16 TFLite models of the trained classifier, each scored on the
eval split against the SavedModel it came from.

The SavedModel's answers are not recomputed: EvaluationReportGen scored the eval split once and
stored every example's probabilities; the TFLite models run on the same examples (checked by
source path, in the same order) and are compared with those.

The TFLite models take decoded pixels: float32 [batch, size, size, 3] RGB in 0..255, already
resized to the model's input size (what an app gets from the platform's image decoder), and
return float32 probabilities [batch, classes] in label-id order; normalization is inside them.
Decoding and antialiased resizing are not TFLite builtin ops, so the full bytes -> probabilities
signature does not convert; the report names the ops it refuses (IMAGES_SIGNATURE_REFUSED_OPS,
which a test keeps true by converting that signature), instead of every export re-trying a
conversion known to fail.
"""

import json
import os

import numpy as np
import tensorflow as tf
import tf_keras as keras
from apache_beam.io.filesystems import FileSystems
from tensorflow.lite.python.convert_phase import ConverterError
from tf_keras.protobuf import saved_metadata_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import path_utils

from components.artifacts import EvaluationReport, TFLiteModel
from components.eval_split import read_batches, split_files
from components.evaluation_report import EvalScores, read_scores
from components.trainer.export import IMAGES_SIGNATURE
from components.trainer.model import in_float32
from components.trainer.preprocessing import CHANNELS, Normalization, decode_and_resize, normalize
from components.trainer.serving_assets import read_normalization
from data_prep.runtime.cores import usable_cores

FILES = {"float32": "model_float32.tflite", "float16": "model_float16.tflite"}
REPORT_FILE = "tflite_report.json"
PIXELS_INPUT = "pixels"
# The ops TFLite refuses in an exported model's IMAGES_SIGNATURE: decoding and antialiased
# resizing (tests/components/test_tflite_export.py converts that signature to keep this true).
IMAGES_SIGNATURE_REFUSED_OPS = ("tf.DecodeImage", "tf.ScaleAndTranslate")


KERAS_METADATA_FILE = "keras_metadata.pb"  # where a Keras-made SavedModel records its layers
VARIABLES_PREFIX = os.path.join("variables", "variables")  # the SavedModel's checkpoint


def rebuild_keras_model(saved_model_dir: str) -> keras.Model:
    """The exported Keras model, built from the architecture the SavedModel records and given
    its variables: the same model keras.models.load_model returns, without reviving every layer
    from the SavedModel, which costs seconds. Fails when a variable of the architecture is
    missing from the checkpoint. Computes in float32 whatever policy it trained
    under: TFLite has no bfloat16 type (a model trained under mixed_bfloat16 failed both
    conversions, "Failed to convert element type 'bf16'")."""
    metadata = saved_metadata_pb2.SavedMetadata()
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, KERAS_METADATA_FILE), "rb") as handle:
        metadata.ParseFromString(handle.read())
    [root] = [node for node in metadata.nodes if node.node_path == "root"]
    model = keras.models.model_from_json(
        json.dumps(in_float32(json.loads(root.metadata)["model_config"])),
    )
    restored = model.load_weights(os.path.join(saved_model_dir, VARIABLES_PREFIX))
    restored.assert_existing_objects_matched()
    return model


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


def convert(function, model: keras.Model, quantization: str) -> bytes:
    """A builtin-ops TFLite flatbuffer; 'float16' stores the weights as float16.

    The concrete function is frozen and converted directly: by default the converter first
    saves `model` with the function as a temporary SavedModel, and saving a Keras model traces
    every layer's call again, most of each conversion's time."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], model)
    converter.experimental_lower_to_saved_model = False
    if quantization == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def refused_ops(error: ConverterError) -> list[str]:
    names = {found.operator.name for found in error.errors if found.operator.name}
    return sorted(names) or [str(error).splitlines()[0]]


def convert_all(function, model: keras.Model) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """Every quantization that converts, and the refused ops of each that does not: a model
    TFLite cannot express still gets served and pushed, with the reason in the report."""
    converted, failed = {}, {}
    for name in FILES:
        try:
            converted[name] = convert(function, model, name)
        except ConverterError as error:
            failed[name] = refused_ops(error)
    return converted, failed


def tflite_probabilities(flatbuffer: bytes, pixels: np.ndarray) -> np.ndarray:
    """The TFLite model's probabilities for `pixels`, on every usable core: the interpreter's
    default is one thread; more threads give the same probabilities sooner."""
    interpreter = tf.lite.Interpreter(model_content=flatbuffer, num_threads=usable_cores())
    [input_detail] = interpreter.get_input_details()
    interpreter.resize_tensor_input(input_detail["index"], pixels.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(input_detail["index"], pixels.astype(np.float32))
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


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


@component
def TFLiteExport(  # noqa: N802  TFX component names are classes
    model: InputArtifact[standard_artifacts.Model],
    examples: InputArtifact[standard_artifacts.Examples],
    readable_evaluation: InputArtifact[EvaluationReport],
    tflite: OutputArtifact[TFLiteModel],
    eval_split: Parameter[str] = "eval",
) -> None:
    """Converts the model to float32 and float16 TFLite and scores both on `eval_split` against
    the SavedModel's stored scores (readable_evaluation, which scored the same split); writes
    the .tflite files and tflite_report.json."""
    saved_model_dir = path_utils.serving_model_path(model.uri)
    keras_model = rebuild_keras_model(saved_model_dir)
    image_size = int(keras_model.input_shape[1])
    normalization = read_normalization(saved_model_dir)
    function = pixels_function(keras_model, image_size, normalization)
    flatbuffers, failed = convert_all(function, keras_model)
    for name, flatbuffer in flatbuffers.items():
        with FileSystems.create(os.path.join(tflite.uri, FILES[name])) as handle:
            handle.write(flatbuffer)
    report = {
        "files": {name: FILES[name] for name in flatbuffers},
        "conversion_failed": failed,
        "input": {
            "name": PIXELS_INPUT,
            "dtype": "float32",
            "shape": [None, image_size, image_size, CHANNELS],
            "meaning": "RGB pixels in 0..255, resized to the input size (antialiased bilinear)",
        },
        "output": {"name": "probabilities", "dtype": "float32", "meaning": "label-id order"},
        "bytes": {name: len(flatbuffer) for name, flatbuffer in flatbuffers.items()},
        "not_convertible": {
            "signature": IMAGES_SIGNATURE,
            "ops": list(IMAGES_SIGNATURE_REFUSED_OPS),
            "note": "the TFLite models start after decoding and resizing; an app decodes and "
            "resizes with its platform's image library",
        },
        "eval": compare_on_split(
            read_scores(readable_evaluation.uri),
            flatbuffers,
            split_files(examples, eval_split),
            image_size,
        ),
    }
    with FileSystems.create(os.path.join(tflite.uri, REPORT_FILE)) as handle:
        handle.write(json.dumps(report, indent=2).encode())
    for name, gap in report["eval"]["accuracy_gap_points"].items():
        tflite.set_float_custom_property(f"{name}_accuracy_gap_points", gap)
    saved_model_accuracy = report["eval"]["accuracy"]["saved_model"]
    tflite.set_float_custom_property("saved_model_accuracy", saved_model_accuracy)
