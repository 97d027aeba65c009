"""The training step: graph mode with one trace, optional XLA, loss scaling, gradient accumulation.

`TrainingEngine.run(iterator, steps)` runs `steps` optimizer steps in one graph call (a
tf.function loop, as Keras' steps_per_execution does), so Python runs once per call, not per step.
Its input signature is fixed: the distributed iterator's spec (static shapes: training batches
drop their remainder) and a scalar step-count tensor, so the function is traced once for the
whole run, including shorter calls at epoch ends; `traces` counts the traces for tests and the
performance report. Which variables train is fixed at trace time, so each set of trainable
variables (each phase of a fine-tuning schedule) has its own graph, traced once; `graphs` counts
them.

Each optimizer step takes one batch of batch_size x accumulation x replicas examples. Every replica
splits its share into `accumulation` micro-batches, sums their gradients and applies the mean once:
the same update as one big batch (batch normalization aside: its statistics are per micro-batch).
With XLA only the gradient computation is compiled; reading the input and applying gradients
(all-reduce across replicas) stay outside, as XLA cannot compile iterator ops.

Labels are int class ids [batch] or, when the input pipeline makes soft labels (label smoothing,
MixUp, CutMix), float targets [batch, classes]; the loss (sparse or categorical cross-entropy) is
chosen by their rank when the step is traced, and training accuracy counts a soft target's
largest class as its label.

Time spent waiting for input is measured inside the graph: a timestamp before and after each
get_next, the first one ordered after the previous step's loss.

`evaluate(dataset)` scores the model on every example of a dataset in one graph call, each replica
(and each worker, by the dataset's auto-shard policy) taking its part of every batch.

Every graph here is traced without AutoGraph, its loops written as tf.while_loop: under AutoGraph
each trace would also convert tf_keras' own code (TensorFlow's conversion rules exempt the 'keras'
package, not tf_keras), several times the cost of the trace itself.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


class TrainingEngine:
    """Owns the step functions, the training and evaluation metrics and the input-wait counter of
    one model."""

    def __init__(
        self,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        strategy: tf.distribute.Strategy,
        accumulation: int = 1,
        jit_compile: bool = False,
        graph: bool = True,
    ):
        """Create it inside `strategy.scope()`. `graph=False` runs the same step eagerly (for
        benchmarks and debugging); `optimizer` is a LossScaleOptimizer under mixed_float16."""
        self.model = model
        self.optimizer = optimizer
        self.strategy = strategy
        self.accumulation = accumulation
        self.graph = graph
        self.jit_compile = jit_compile and graph
        self.loss = keras.metrics.Mean("loss")
        self.accuracy = keras.metrics.SparseCategoricalAccuracy("accuracy")
        self.eval_loss = keras.metrics.Mean("eval_loss")
        self.eval_accuracy = keras.metrics.SparseCategoricalAccuracy("eval_accuracy")
        self._sparse_loss = keras.losses.SparseCategoricalCrossentropy(
            reduction=keras.losses.Reduction.NONE
        )
        self._soft_loss = keras.losses.CategoricalCrossentropy(
            reduction=keras.losses.Reduction.NONE
        )
        self.input_wait_seconds = tf.Variable(
            0.0,
            dtype=tf.float64,
            trainable=False,
            name="input_wait_seconds",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
        self._traces = 0
        self._gradients = (
            tf.function(self._micro_batch_gradients, jit_compile=True, autograph=False)
            if self.jit_compile
            else self._micro_batch_gradients
        )
        self._runs = {}  # a graph per set of trainable variables, made on its first run
        self._evaluations = {}  # a graph per evaluation dataset's element spec

    @property
    def traces(self) -> int:
        """How many times the training loop has been traced (1 per entry of `graphs` after any
        number of calls)."""
        return self._traces

    @property
    def graphs(self) -> int:
        """Graphs made so far: one per set of trainable variables the model has trained with."""
        return len(self._runs)

    def run(self, iterator, steps: int) -> tf.Tensor:
        """Runs `steps` optimizer steps on batches from `iterator` (a distributed iterator);
        returns the last step's mean loss. A graph's input signature is fixed by its first
        call: the iterator's element spec (static batch shapes) and a scalar step count."""
        if not self.graph:
            return self._steps(iterator, tf.constant(steps, tf.int32))
        key = tuple(variable.ref() for variable in self.model.trainable_variables)
        if key not in self._runs:
            signature = [tf.type_spec_from_value(iterator), tf.TensorSpec([], tf.int32)]
            self._runs[key] = tf.function(self._steps, input_signature=signature, autograph=False)
        return self._runs[key](iterator, tf.constant(steps, tf.int32))

    def training_metrics(self) -> dict[str, float]:
        """Mean loss and accuracy of the training steps since the last reset_metrics()."""
        return {"loss": float(self.loss.result()), "accuracy": float(self.accuracy.result())}

    def reset_metrics(self) -> None:
        self.loss.reset_state()
        self.accuracy.reset_state()

    def evaluate(self, dataset: tf.data.Dataset) -> dict[str, float]:
        """Mean cross-entropy ('loss') and accuracy of the model over every example of `dataset`
        (batches of the global batch size, the last one may be partial), as Keras' evaluate
        computes them, and how many examples they cover ('examples'): a replica left without
        examples in a partial batch adds nothing, and under MultiWorkerMirroredStrategy each
        worker reads the batches its auto-shard policy gives it and the metrics are summed over
        workers."""
        self._agree_on_replica_statistics()
        self.eval_loss.reset_state()
        self.eval_accuracy.reset_state()
        iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
        if self.graph:
            # Traced once per dataset, however often it is scored (every epoch's validation).
            spec = tf.type_spec_from_value(iterator)
            if spec not in self._evaluations:
                self._evaluations[spec] = tf.function(
                    self._evaluate, input_signature=[spec], autograph=False
                )
            self._evaluations[spec](iterator)
        else:
            self._evaluate(iterator)
        # Every worker reads: under MultiWorkerMirroredStrategy a read is a collective.
        return {
            "loss": float(self.eval_loss.result()),
            "accuracy": float(self.eval_accuracy.result()),
            "examples": int(self.eval_loss.count.numpy()),
        }

    def _agree_on_replica_statistics(self) -> None:
        """Gives every replica the mean of the statistics each kept for itself (BatchNormalization's
        moving mean and variance, variables synchronized on read): a replica evaluates with its
        own copy while the export reads the mean, so without this the evaluation would score a
        model other than the one exported. Under MultiWorkerMirroredStrategy each read is a
        collective: every worker evaluates."""
        for variable in self.model.non_trainable_variables:
            if variable.synchronization == tf.VariableSynchronization.ON_READ:
                variable.assign(variable.read_value())

    def _evaluate(self, iterator):
        def batch(_):
            optional = iterator.get_next_as_optional()

            def score():
                self.strategy.run(self._replica_evaluation, args=optional.get_value())
                return tf.constant(True)

            return [tf.cond(optional.has_value(), score, lambda: tf.constant(False))]

        tf.while_loop(lambda more: more, batch, [tf.constant(True)])

    def _replica_evaluation(self, images, labels):
        def score():
            probabilities = tf.cast(self.model(images, training=False), tf.float32)
            self.eval_loss.update_state(self._per_example_loss(labels, probabilities))
            self.eval_accuracy.update_state(labels, probabilities)
            return tf.constant(True)

        # A replica without examples (a partial last batch, or a worker whose share has run out)
        # skips the model: TensorFlow 2.16's oneDNN Conv2D returns an empty batch unchanged, in
        # its input's channels, which the next layer refuses.
        tf.cond(tf.shape(images)[0] > 0, score, lambda: tf.constant(False))

    def _steps(self, iterator, steps):
        if self.graph:
            self._traces += 1  # Python side effect: runs only while tracing

        def step(done, loss):
            with tf.control_dependencies([loss]):
                start = tf.timestamp()
            with tf.control_dependencies([start]):
                images, labels = next(iterator)
            local = self.strategy.experimental_local_results(labels)
            with tf.control_dependencies(list(local)):
                self.input_wait_seconds.assign_add(tf.timestamp() - start)
            replica_losses = self.strategy.run(self._replica_step, args=(images, labels))
            loss = self.strategy.reduce(tf.distribute.ReduceOp.SUM, replica_losses, axis=None)
            return done + 1, loss

        _, loss = tf.while_loop(
            lambda done, _: done < steps, step, [tf.constant(0), tf.constant(0.0)]
        )
        return loss

    def _replica_step(self, images, labels):
        gradients, per_example_loss, probabilities = self._gradients(images, labels)
        self.optimizer.apply_gradients(zip(gradients, self.model.trainable_variables, strict=True))
        self.loss.update_state(per_example_loss)
        self.accuracy.update_state(_class_ids(labels), probabilities)
        return tf.nn.compute_average_loss(
            per_example_loss, global_batch_size=per_example_loss.shape[0] * self._replicas()
        )

    def _replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    def _micro_batch_gradients(self, images, labels):
        """Mean gradient over this replica's micro-batches, scaled so that the all-reduce (a sum
        over replicas) gives the mean over the global batch. Also per-example losses and
        probabilities for the metrics."""
        if images.shape[0] % self.accumulation:
            raise ValueError(
                f"a replica's batch of {images.shape[0]} does not split into "
                f"{self.accumulation} equal micro-batches"
            )
        micro = images.shape[0] // self.accumulation
        if self.accumulation == 1:
            gradients, per_example_loss, probabilities = self._gradients_of(
                images, labels, micro * self._replicas()
            )
            return self._unscaled(gradients), per_example_loss, probabilities
        micro_images = tf.reshape(images, [self.accumulation, micro, *images.shape[1:]])
        micro_labels = tf.reshape(labels, [self.accumulation, micro, *labels.shape[1:]])
        variables = self.model.trainable_variables

        def accumulate(index, sums, losses, outputs):
            gradients, per_example_loss, probabilities = self._gradients_of(
                micro_images[index], micro_labels[index], micro * self._replicas()
            )
            sums = [total + gradient for total, gradient in zip(sums, gradients, strict=True)]
            return (
                index + 1,
                sums,
                losses.write(index, per_example_loss),
                outputs.write(index, probabilities),
            )

        _, sums, losses, outputs = tf.while_loop(
            lambda index, *_: index < self.accumulation,
            accumulate,
            [
                tf.constant(0),
                [tf.zeros_like(variable) for variable in variables],
                tf.TensorArray(tf.float32, size=self.accumulation, element_shape=[micro]),
                tf.TensorArray(tf.float32, size=self.accumulation),
            ],
        )
        gradients = [total / self.accumulation for total in sums]
        probabilities = outputs.stack()
        return (
            self._unscaled(gradients),
            tf.reshape(losses.stack(), [-1]),
            tf.reshape(probabilities, [-1, probabilities.shape[-1]]),
        )

    def _unscaled(self, gradients):
        if isinstance(self.optimizer, keras.mixed_precision.LossScaleOptimizer):
            return self.optimizer.get_unscaled_gradients(gradients)
        return gradients

    def _per_example_loss(self, labels, probabilities):
        """Cross-entropy against int labels [batch] or soft targets [batch, classes]."""
        if labels.shape.rank == 2:
            return self._soft_loss(labels, probabilities)
        return self._sparse_loss(labels, probabilities)

    def _gradients_of(self, images, labels, global_micro_batch: int):
        """Gradients of the micro-batch's share of the global mean loss (loss-scaled under
        mixed_float16, where small float16 gradients would otherwise underflow to zero)."""
        with tf.GradientTape() as tape:
            probabilities = self.model(images, training=True)
            per_example_loss = self._per_example_loss(labels, probabilities)
            loss = tf.nn.compute_average_loss(
                per_example_loss, global_batch_size=global_micro_batch
            )
            if self.model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
            if isinstance(self.optimizer, keras.mixed_precision.LossScaleOptimizer):
                loss = self.optimizer.get_scaled_loss(loss)
        gradients = tape.gradient(loss, self.model.trainable_variables)
        return gradients, per_example_loss, tf.cast(probabilities, tf.float32)


def _class_ids(labels: tf.Tensor) -> tf.Tensor:
    """Int labels as they are; soft targets [batch, classes] as their largest class."""
    return tf.argmax(labels, axis=-1) if labels.shape.rank == 2 else labels
