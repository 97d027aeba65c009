"""The classifier: a backbone by name and a float32 softmax head.

The head's output is float32 even under a mixed-precision policy, so losses and served
probabilities keep full precision.
"""

from __future__ import annotations

import tf_keras as keras
from tensorflow.python.autograph.core import config as autograph_config

from components.trainer.config import APPLICATIONS, TrainerConfig
from components.trainer.preprocessing import CHANNELS

# small_cnn: (filters, convolutions) per stage, 2x2 max pooling between stages. Measured on the
# default dataset at 64x64, 30 epochs, 2 CPU cores: 0.94-0.96 eval accuracy in 1.5-2.5 minutes.
# Alternatives tried (without warmup): a 4th stage of two 256-filter convolutions 0.89, a 3rd
# convolution in the last stage 0.66, a stride-1 stem 0.67 at 2.5x the time; this stack 0.93.
SMALL_CNN_STAGES = ((32, 2), (64, 2), (128, 2))
STEM_STRIDE = 2  # of the first convolution: quarters the compute of every later layer
DROPOUT = 0.2
# Moving statistics over ~10 steps, not Keras' default ~100: runs here are a few hundred steps, and
# slow statistics lag the fast-changing weights, so evaluation swings widely between epochs.
BATCH_NORM_MOMENTUM = 0.9


def build_model(config: TrainerConfig, num_classes: int) -> keras.Model:
    """Normalized float32 images [batch, size, size, 3] -> class probabilities [batch, classes].

    Build it inside the distribution strategy's scope. `config.weights_path`, when set, is loaded
    into the backbone (the model without its head). Also exempts tf_keras from AutoGraph.
    """
    exempt_tf_keras_from_autograph()
    if num_classes < 2:
        raise ValueError(f"need at least 2 classes, got {num_classes}")
    input_shape = (config.image_size, config.image_size, CHANNELS)
    backbone = _backbone(config.model, input_shape)
    if config.weights_path:
        backbone.load_weights(config.weights_path)
    inputs = keras.Input(input_shape, name="image")
    x = keras.layers.Dropout(DROPOUT)(backbone(inputs))
    outputs = keras.layers.Dense(
        num_classes, activation="softmax", dtype="float32", name="probabilities"
    )(x)
    return keras.Model(inputs, outputs, name=f"{config.model}_classifier")


def _backbone(name: str, input_shape: tuple[int, int, int]) -> keras.Model:
    """Image -> pooled feature vector."""
    if name == "small_cnn":
        return _small_cnn(input_shape)
    options = {"include_preprocessing": False} if name == "mobilenet_v3_small" else {}
    application = getattr(keras.applications, APPLICATIONS[name])
    return application(
        include_top=False, weights=None, input_shape=input_shape, pooling="avg", **options
    )


def _small_cnn(input_shape: tuple[int, int, int]) -> keras.Model:
    """A plain VGG-style stack (conv-BN-ReLU), global average pooled."""
    inputs = keras.Input(input_shape)
    x = inputs
    for stage, (filters, convolutions) in enumerate(SMALL_CNN_STAGES):
        if stage:
            x = keras.layers.MaxPooling2D()(x)
        for index in range(convolutions):
            stride = STEM_STRIDE if stage == index == 0 else 1
            x = keras.layers.Conv2D(filters, 3, stride, padding="same", use_bias=False)(x)
            x = keras.layers.BatchNormalization(momentum=BATCH_NORM_MOMENTUM)(x)
            x = keras.layers.ReLU()(x)
    outputs = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, outputs, name="small_cnn")


def exempt_tf_keras_from_autograph() -> None:
    """Stops AutoGraph from converting tf_keras' own code on every trace (idempotent).

    TensorFlow's conversion rules exempt the 'keras' package, but tf_keras is the same Keras 2 code
    under a new name that the list lacks, so every fit/evaluate/export trace rewrote all of Keras'
    internals. Measured on 2 CPU cores: first fit call 31 s -> 4.6 s, export 10.8 s -> 2.5 s.
    User code (custom layers, input functions) is still converted. TF is pinned (2.16), so the
    private module this uses cannot move under us silently: a move fails at import.
    """
    rule = autograph_config.DoNotConvert("tf_keras")
    if not any(
        isinstance(r, autograph_config.DoNotConvert) and r.matches("tf_keras")
        for r in autograph_config.CONVERSION_RULES
    ):
        autograph_config.CONVERSION_RULES = (rule, *autograph_config.CONVERSION_RULES)
