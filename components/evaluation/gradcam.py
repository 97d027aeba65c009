"""Grad-CAM (Selvaraju et al., 2017): where in an image the exported classifier found the
evidence for a class.

Computed through the exported model's own preprocessing: image bytes are decoded, resized and
normalized by preprocess_image with the normalization the SavedModel carries, then run through
the classifier rebuilt from the SavedModel's architecture and variables. The heatmap is the ReLU
of the backbone's last convolutional feature map weighted, channel by channel, by the mean
gradient of the class's logit (its score before the softmax, which saturates), scaled to 0..1
per image. overlay() draws it over the image as the model saw it, as a PNG.
"""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.training.export import rebuild_keras_model
from components.training.model import backbone_of
from components.training.preprocessing import decode_and_resize, normalize
from components.training.serving_assets import read_label_names, read_normalization

OVERLAY_SIDE = 160  # pixels a side of an overlay: the UI's thumbnail size
HEATMAP_OPACITY = 0.45
COLORMAP = "jet"  # low evidence blue, high red: the colours Grad-CAM figures use
BATCH_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Explanation:
    class_id: int  # the class explained
    class_name: str
    probability: float  # the model's probability of that class
    heatmap: np.ndarray  # float32 [rows, columns] in 0..1, the feature map's resolution
    pixels: np.ndarray  # uint8 [size, size, 3]: the image as the model saw it, before normalizing


class Explainer:
    """Grad-CAM of one exported model (a SavedModel folder)."""

    def __init__(self, saved_model_dir: str):
        self.model = rebuild_keras_model(saved_model_dir)
        self.image_size = int(self.model.input_shape[1])
        self.normalization = read_normalization(saved_model_dir)
        self.label_names = read_label_names(saved_model_dir)
        self._stages = split_at_feature_map(self.model)

    def explain(
        self, encoded: list[bytes], class_ids: list[int] | None = None
    ) -> list[Explanation]:
        """One explanation per image, of the class given for it (by default the model's top
        class)."""
        found = []
        for start in range(0, len(encoded), BATCH_SIZE):
            chunk = encoded[start : start + BATCH_SIZE]
            wanted = None if class_ids is None else class_ids[start : start + BATCH_SIZE]
            found += self._explain_batch(chunk, wanted)
        return found

    def _explain_batch(self, encoded: list[bytes], class_ids: list[int] | None):
        pixels = tf.stack([decode_and_resize(image, self.image_size) for image in encoded])
        before, features_model, after, head = self._stages
        x = normalize(pixels, self.normalization)
        for layer in before:
            x = layer(x, training=False)
        features = features_model(x, training=False)
        with tf.GradientTape() as tape:
            tape.watch(features)  # recorded even where the backbone's weights are frozen
            x = features
            for layer in after:
                x = layer(x, training=False)
            logits = tf.matmul(x, head.kernel) + head.bias
            probabilities = tf.nn.softmax(logits).numpy()
            if class_ids is None:
                class_ids = probabilities.argmax(axis=1).tolist()
            scores = tf.gather(logits, class_ids, axis=1, batch_dims=1)
        gradients = tape.gradient(scores, features)
        weights = tf.reduce_mean(gradients, axis=(1, 2), keepdims=True)
        heatmaps = tf.nn.relu(tf.reduce_sum(weights * features, axis=-1)).numpy()
        peaks = heatmaps.max(axis=(1, 2), keepdims=True)
        heatmaps = np.divide(heatmaps, peaks, out=np.zeros_like(heatmaps), where=peaks > 0)
        shown = np.clip(np.round(pixels.numpy()), 0, 255).astype(np.uint8)
        return [
            Explanation(
                class_id,
                self.label_names[class_id],
                float(probabilities[i, class_id]),
                heatmaps[i].astype(np.float32),
                shown[i],
            )
            for i, class_id in enumerate(class_ids)
        ]


def split_at_feature_map(model: keras.Model):
    """The classifier cut at its backbone's last feature map, for a model build_model made (a
    chain: input, optional input layer, backbone, dropout, softmax Dense): the layers before
    the backbone, the backbone up to that map, the layers after it (pooling, dropout), and the
    Dense head."""
    backbone = backbone_of(model)
    layers = model.layers[1:]  # after the InputLayer
    head = layers[-1]
    if not isinstance(head, keras.layers.Dense):
        raise ValueError(f"{model.name}: the last layer is {head.name}, not a Dense head")
    inner = backbone.layers
    last_map = max(i for i, layer in enumerate(inner) if len(layer.output.shape) == 4)
    features_model = keras.Model(backbone.inputs, inner[last_map].output)
    index = layers.index(backbone)
    after = [*inner[last_map + 1 :], *layers[index + 1 : -1]]
    return layers[:index], features_model, after, head


def overlay(explanation: Explanation, side: int = OVERLAY_SIDE) -> bytes:
    """The heatmap in COLORMAP over the image as the model saw it, `side` pixels a side, as
    PNG bytes."""
    from matplotlib import colormaps
    from PIL import Image

    image = Image.fromarray(explanation.pixels).resize((side, side), Image.Resampling.BILINEAR)
    heat = Image.fromarray(np.round(explanation.heatmap * 255).astype(np.uint8))
    heat = np.asarray(heat.resize((side, side), Image.Resampling.BILINEAR)) / 255.0
    colored = colormaps[COLORMAP](heat)[..., :3] * 255
    blended = (1 - HEATMAP_OPACITY) * np.asarray(image) + HEATMAP_OPACITY * colored
    buffer = io.BytesIO()
    Image.fromarray(np.round(blended).astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def overlays(saved_model_dir: str, encoded: list[bytes]) -> list[tuple[Explanation, bytes]]:
    """Each image's explanation of the model's top class and its overlay PNG: what a caller
    holding image bytes and a model folder needs."""
    explained = Explainer(saved_model_dir).explain(encoded)
    return [(explanation, overlay(explanation)) for explanation in explained]
