"""The classifier: a backbone by name and a float32 softmax head.

The head's output is float32 even under a mixed-precision policy, so losses and served
probabilities keep full precision.

The model's input is always the pipeline's normalized image (preprocessing.normalize with the
train split's statistics), so the input pipeline, both serving signatures and TFLite stay the
same for every model. A backbone that needs its own input scaling (pretrained weights expect the
preprocessing they were trained with) gets a first layer, BackboneInput, that maps the normalized
image back to 0..255 pixels and applies that preprocessing, inside the model and so inside every
exported graph.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from components.training import efficientnet_lite
from components.training.preprocessing import CHANNELS, Normalization
from components.training.trainer_config import APPLICATIONS, OFFLINE_IMAGENET, TrainerConfig

# The tf_keras.applications module whose preprocess_input matches each backbone's weights. For
# MobileNetV3 and EfficientNet (Lite0 too) it is the identity: their rescaling is built into the
# model (include_preprocessing), which then takes 0..255 pixels.
PREPROCESSING_MODULES = {
    OFFLINE_IMAGENET: "efficientnet",
    "resnet50": "resnet50",
    "mobilenet_v3_small": "mobilenet_v3",
    "efficientnet_b0": "efficientnet",
}

# small_cnn: (filters, convolutions) per stage, 2x2 max pooling between stages: on the default
# dataset it scored better than a fourth stage, a third convolution per stage or a stride-1 stem,
# and trains in minutes on two CPU cores.
SMALL_CNN_STAGES = ((32, 2), (64, 2), (128, 2))
STEM_STRIDE = 2  # of the first convolution: quarters the compute of every later layer
# Moving statistics over ~10 steps, not Keras' default ~100 (~1,000 for MobileNetV3): runs here are
# a few hundred steps, and slow statistics lag the fast-changing weights, so evaluation swings
# widely between epochs, or (a deep backbone from scratch) stays at chance.
BATCH_NORM_MOMENTUM = 0.9


def build_model(
    config: TrainerConfig,
    num_classes: int,
    normalization: Normalization | None = None,
) -> keras.Model:
    """Normalized float32 images [batch, size, size, 3] -> class probabilities [batch, classes].

    Build it inside the distribution strategy's scope. Pretrained weights (`config.weights`, or
    the file `config.weights_path`) are loaded into the backbone (the model without its head),
    which then runs its batch normalization in inference mode even where it trains (the tf_keras
    transfer-learning guide's rule: moving statistics from few images would overwrite the
    pretrained ones). `normalization` (the one the
    input pipeline applies) is needed when the backbone brings its own preprocessing.
    """
    if num_classes < 2:
        raise ValueError(f"need at least 2 classes, got {num_classes}")
    input_shape = (config.image_size, config.image_size, CHANNELS)
    own_preprocessing = config.uses_backbone_preprocessing
    backbone = _backbone(config, input_shape, own_preprocessing)
    if config.weights_path:
        load_backbone_weights(backbone, config.weights_path)
    inputs = keras.Input(input_shape, name="image")
    x = inputs
    if own_preprocessing:
        if normalization is None:
            raise ValueError(f"{config.model}'s own preprocessing needs the input normalization")
        x = BackboneInput(config.model, normalization.mean, normalization.std)(x)
    x = backbone(x, training=False if config.fine_tunes else None)
    x = keras.layers.Dropout(config.dropout)(x)
    outputs = keras.layers.Dense(
        num_classes, activation="softmax", dtype="float32", name="probabilities"
    )(x)
    return keras.Model(inputs, outputs, name=f"{config.model}_classifier")


def in_float32(config):
    """A Keras model config with every layer's dtype policy float32. Mixed policies keep their
    variables in float32, so the same weights fit; only the compute dtype changes."""
    if isinstance(config, dict):
        if config.get("class_name") == "Policy":
            return {**config, "config": {**config["config"], "name": "float32"}}
        return {key: in_float32(value) for key, value in config.items()}
    if isinstance(config, list):
        return [in_float32(value) for value in config]
    return config


def float32_twin(model: keras.Model) -> keras.Model:
    """`model` itself if it computes in float32, else the same architecture and weights computing
    in float32: what the export serves, so a model trained under a mixed policy runs at full
    speed on any CPU (one without native bfloat16 emulates it, many times slower) and
    the Evaluator scores exactly the graph that is served."""
    config = model.get_config()
    float32_config = in_float32(config)
    if float32_config == config:
        return model
    twin = keras.Model.from_config(
        float32_config,
    )
    twin.set_weights(model.get_weights())
    return twin


def backbone_of(model: keras.Model) -> keras.Model:
    """The backbone inside a build_model classifier: its one nested model."""
    (backbone,) = (layer for layer in model.layers if isinstance(layer, keras.Model))
    return backbone


@keras.saving.register_keras_serializable(package="imgpipe")
class BackboneInput(keras.layers.Layer):
    """Normalized images -> the input the backbone's weights expect: back to 0..255 pixels, then
    the backbone's own preprocessing (tf_keras.applications' preprocess_input; [-1, 1] for
    small_cnn). Float32 under every precision policy, like the pixels it undoes."""

    def __init__(self, backbone: str, mean, std, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.backbone = backbone
        self.mean = tuple(mean)
        self.std = tuple(std)

    def call(self, images):
        pixels = images * tf.constant(self.std) + tf.constant(self.mean)
        if self.backbone == "small_cnn":
            return pixels / 127.5 - 1.0
        module = getattr(keras.applications, PREPROCESSING_MODULES[self.backbone])
        return module.preprocess_input(pixels)

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": self.backbone,
            "mean": self.mean,
            "std": self.std,
        }


def load_backbone_weights(backbone: keras.Model, path: str) -> None:
    """Loads a weights file into `backbone`, under any precision policy. An .h5 file goes
    through set_weights, which casts each value to its variable's dtype: Keras' own .h5 loader
    cannot put float32 values into the bfloat16 variables some layers (EfficientNet's input
    normalization) have under mixed_bfloat16."""
    import h5py

    values = None
    if path.endswith(".h5"):
        with tf.io.gfile.GFile(path, "rb") as handle, h5py.File(handle, "r") as weights:
            # Keras' (legacy) .h5 weights: a group per layer with weights, in layer order.
            if "layer_names" in weights.attrs:
                values = [
                    weights[layer][name][()]
                    for layer in _names(weights.attrs["layer_names"])
                    for name in _names(weights[layer].attrs["weight_names"])
                ]
    if values is None:  # a TF checkpoint or a .weights.h5: Keras restores them
        backbone.load_weights(path)
    else:
        backbone.set_weights(values)


def _names(values) -> list[str]:
    return [value.decode() if isinstance(value, bytes) else str(value) for value in values]


def _backbone(
    config: TrainerConfig, input_shape: tuple[int, int, int], own_preprocessing: bool
) -> keras.Model:
    """Image -> pooled feature vector, with config.weights' weights."""
    name = config.model
    if name == "small_cnn":
        return _small_cnn(input_shape)
    backbone = _pretrained_or_random(config, input_shape, own_preprocessing)
    if not config.fine_tunes:
        _set_batch_norm_momentum(backbone, BATCH_NORM_MOMENTUM)
    return backbone


def _set_batch_norm_momentum(backbone: keras.Model, momentum: float) -> None:
    """Sets the moving-average momentum of every batch normalization in `backbone` (read at
    each call, and saved in the model's config)."""
    for layer in backbone.submodules:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = momentum


def _pretrained_or_random(
    config: TrainerConfig, input_shape: tuple[int, int, int], own_preprocessing: bool
) -> keras.Model:
    """A backbone from tf_keras: Lite0's builder or an application, with config.weights."""
    name = config.model
    if name == OFFLINE_IMAGENET:
        backbone = efficientnet_lite.efficientnet_lite0(input_shape)
        if config.weights == "imagenet":
            load_backbone_weights(backbone, efficientnet_lite.imagenet_weights_file())
        return backbone
    options = {"include_preprocessing": own_preprocessing} if name == "mobilenet_v3_small" else {}
    application = getattr(keras.applications, APPLICATIONS[name])
    return application(
        include_top=False,
        weights=config.weights,
        input_shape=input_shape,
        pooling="avg",
        **options,
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
