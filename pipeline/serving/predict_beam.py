"""`imgpipe predict` as one Beam job, for many files or any runner's options: the files in
bundles, each examined as pipeline/serving/predict.py examines it, the images scored in batches
by Beam's RunInference on the SavedModel's image signature (ImageModel), a batch the model fails
on reported per file, every row gathered into one file."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.ml.inference.base import (
    KeyedModelHandler,
    ModelHandler,
    PredictionResult,
    RunInference,
)
from apache_beam.options.pipeline_options import PipelineOptions

from data_prep.reading.image_validation import ImageLimits
from data_prep.reading.sources import SourceFile
from pipeline.config.beam_options import resolve_beam_args
from pipeline.predictions_file import PredictionRow, write_rows
from pipeline.serving.scoring import (
    MAX_BATCH_SIZE,
    ImageModel,
    PredictSettings,
    examine,
    failed_rows,
    model_version,
    scored_row,
)

FILES_PER_BUNDLE = 256


class ImageModelHandler(ModelHandler[bytes, PredictionResult, ImageModel]):
    """ImageModel for RunInference: loaded once per worker, a batch of encoded images in."""

    def __init__(self, model_dir: str):
        super().__init__()
        self._model_dir = model_dir

    def load_model(self) -> ImageModel:
        return ImageModel(self._model_dir)

    def run_inference(self, batch, model, inference_args=None):
        probabilities = model.probabilities(list(batch))
        return [
            PredictionResult(image, row, self._model_dir)
            for image, row in zip(batch, probabilities, strict=True)
        ]

    def batch_elements_kwargs(self):
        return {"max_batch_size": MAX_BATCH_SIZE}

    def get_metrics_namespace(self) -> str:
        return "imgpipe_predict"


def _examine(bundle: tuple[SourceFile, ...], limits: ImageLimits):
    """Each scorable image as (key, encoded bytes) on the 'images' output; any other file as
    its row."""
    for source in bundle:
        examined = examine(source, limits)
        if isinstance(examined, PredictionRow):
            yield examined
        else:
            yield beam.pvalue.TaggedOutput("images", examined)


def _scored_row(keyed, label_names, settings: PredictSettings, version: str) -> PredictionRow:
    key, result = keyed
    return scored_row(key, result.inference, label_names, settings, version)


def _failed_rows(failed_batch) -> list[PredictionRow]:
    """Beam gives a failed batch's error as (type, repr, traceback lines); the last line of the
    traceback is `Type: message`."""
    batch, (_, _, trace) = failed_batch
    return failed_rows([key for key, _ in batch], trace[-1])


class ScoreImages(beam.PTransform):
    """Files -> one PredictionRow per file, written to `output` sorted by file; outputs the
    output's path."""

    def __init__(
        self,
        sources: list[SourceFile],
        model_dir: str,
        label_names: tuple[str, ...],
        settings: PredictSettings,
        output: str,
    ):
        super().__init__()
        self._sources, self._model_dir, self._label_names = sources, model_dir, label_names
        self._settings, self._output = settings, output

    def expand(self, pbegin):
        version = model_version(self._model_dir)
        size = FILES_PER_BUNDLE
        bundles = [tuple(self._sources[i : i + size]) for i in range(0, len(self._sources), size)]
        examined = (
            pbegin
            # Bundles of files: Create embeds its elements in the pipeline's graph, which Beam
            # pickles and compresses several times, so a million files would cost it a million
            # elements (the ingest bundles its files for the same reason).
            | "Files" >> beam.Create(bundles)
            | "Examine"
            >> beam.FlatMap(_examine, self._settings.limits).with_outputs("images", main="rows")
        )
        scored, failed = (
            examined.images
            | "Score"
            >> RunInference(
                KeyedModelHandler(ImageModelHandler(self._model_dir))
            ).with_exception_handling()
        )
        return (
            (
                examined.rows,
                scored
                | "Rows" >> beam.Map(_scored_row, self._label_names, self._settings, version),
                failed.failed_inferences | "FailedRows" >> beam.FlatMap(_failed_rows),
            )
            | "AllRows" >> beam.Flatten()
            | "Gather" >> beam.combiners.ToList()
            | "Write" >> beam.Map(_write, self._output)
        )


def _write(rows: list[PredictionRow], output: str) -> str:
    write_rows(rows, output)
    return output


def score_with_beam(
    sources: list[SourceFile],
    model_dir: str,
    label_names: tuple[str, ...],
    settings: PredictSettings,
    output: str,
    beam_args: tuple[str, ...],
) -> None:
    """One Beam job over the files, its running mode chosen by their count (as the ingest's),
    writing the rows to output."""
    options = PipelineOptions(list(resolve_beam_args(tuple(beam_args), len(sources))))
    with beam.Pipeline(options=options) as pipeline:
        _ = pipeline | "Predict" >> ScoreImages(sources, model_dir, label_names, settings, output)
