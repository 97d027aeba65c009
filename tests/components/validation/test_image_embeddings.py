"""Lite0 ImageNet embeddings of real photographs: one 1,280-float vector per example, in file
order, and crops of one photograph closer to each other than to another photograph's."""

import hashlib
import io

import numpy as np
import pytest
import skimage.data
from PIL import Image

from components.validation.image_embeddings import EMBEDDING_SIZE, embed_examples
from data_prep.contract import features
from data_prep.writing.tfrecord import GzipTFRecordWriter

# Builds Lite0 and reads its weights (seconds on a CPU): make test only.
pytestmark = pytest.mark.slow

PHOTOS = ("chelsea", "coffee", "rocket")
CROPS = ((0, 0, 200, 200), (60, 40, 300, 260))  # left, top, right, bottom


def _write(path) -> list[str]:
    paths = []
    with GzipTFRecordWriter(str(path)) as writer:
        for label, name in enumerate(PHOTOS):
            photo = Image.fromarray(getattr(skimage.data, name)())
            for index, box in enumerate(CROPS):
                buffer = io.BytesIO()
                photo.crop(box).save(buffer, format="JPEG", quality=90)
                encoded = buffer.getvalue()
                paths.append(f"{name}/{index}.jpg")
                example = {
                    features.IMAGE: encoded,
                    features.IMAGE_FORMAT: b"jpeg",
                    features.HEIGHT: box[3] - box[1],
                    features.WIDTH: box[2] - box[0],
                    features.LABEL: label,
                    features.LABEL_NAME: name,
                    features.SOURCE_PATH: paths[-1],
                    features.SHA256: hashlib.sha256(encoded).hexdigest(),
                }
                writer.write(features.serialize_example(example))
    return paths


def test_crops_of_one_photograph_embed_closer_than_other_photographs(tmp_path):
    paths = _write(tmp_path / "photos.gz")

    embedded = embed_examples([str(tmp_path / "photos.gz")], image_size=128)

    assert embedded.source_paths == paths
    assert embedded.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert embedded.vectors.shape == (6, EMBEDDING_SIZE)
    unit = embedded.vectors / np.linalg.norm(embedded.vectors, axis=1, keepdims=True)
    cosine = unit @ unit.T
    for i in range(0, 6, 2):
        others = [j for j in range(6) if j // 2 != i // 2]
        assert cosine[i, i + 1] > cosine[i, others].max()


def test_no_examples_give_no_vectors(tmp_path):
    with GzipTFRecordWriter(str(tmp_path / "empty.gz")):
        pass
    embedded = embed_examples([str(tmp_path / "empty.gz")], image_size=64)
    assert embedded.source_paths == [] and embedded.vectors.shape == (0, EMBEDDING_SIZE)
