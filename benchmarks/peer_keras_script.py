"""The script a user would write instead of imgpipe: the yardstick of `make bench PARTS=peer`.

tf.keras' image_dataset_from_directory with a validation split, cache() and prefetch(), the same
architecture as imgpipe's Trainer (its model builder, so that only everything around the model
differs), Adam and model.fit. Run as a program, it prints one JSON line: fit's time, training
images/s (validation included, as fit runs it), and the validation accuracy after each epoch with
the seconds since fit began.

  python -m benchmarks.peer_keras_script DATA_DIR --epochs 30 [--precision mixed_bfloat16]
"""

from __future__ import annotations

import argparse
import json
import time

import components  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from components.training.trainer_config import TrainerConfig


def main() -> None:
    import tensorflow as tf
    import tf_keras as keras

    from components.training.model import build_model
    from components.training.preprocessing import Normalization

    defaults = TrainerConfig()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--image-size", type=int, default=defaults.image_size)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--validation-split", type=float, default=0.2)
    args = parser.parse_args()
    keras.utils.set_random_seed(defaults.seed)
    keras.mixed_precision.set_global_policy(args.precision)

    train, validation = keras.utils.image_dataset_from_directory(
        args.data,
        validation_split=args.validation_split,
        subset="both",
        seed=defaults.seed,
        image_size=(args.image_size, args.image_size),
        batch_size=args.batch_size,
    )
    classes = len(train.class_names)
    train_images = sum(int(batch.shape[0]) for batch in train.map(lambda x, y: y))
    # A user scales pixels to [-1, 1]; the model takes normalized images as in imgpipe.
    scale = Normalization((127.5,) * 3, (127.5,) * 3)
    rescale = keras.layers.Rescaling(1 / 127.5, offset=-1.0)
    train = train.map(lambda x, y: (rescale(x), y)).cache().prefetch(tf.data.AUTOTUNE)
    validation = validation.map(lambda x, y: (rescale(x), y)).cache().prefetch(tf.data.AUTOTUNE)

    config = TrainerConfig(image_size=args.image_size, batch_size=args.batch_size)
    model = build_model(config, classes, scale)
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
    )
    curve = []

    class Curve(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            curve.append(
                {"seconds": time.perf_counter() - fit_started, "accuracy": logs["val_accuracy"]}
            )

    fit_started = time.perf_counter()
    model.fit(train, validation_data=validation, epochs=args.epochs, callbacks=[Curve()], verbose=0)
    fit_seconds = time.perf_counter() - fit_started
    print(
        json.dumps(
            {
                "fit_s": fit_seconds,
                "images_per_s": train_images * args.epochs / fit_seconds,
                "eval_accuracy": curve[-1]["accuracy"],
                "curve": curve,
                "train_images": train_images,
                "classes": classes,
                "precision": args.precision,
            }
        )
    )


if __name__ == "__main__":
    main()
