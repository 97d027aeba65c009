"""Dynamic batching: concurrent requests gathered while a model call runs share one call, each
gets exactly its own rows, a refusal reaches only its request, versions never mix, and batching
off answers the same. Gathering is made certain by holding the first call until the others
have gathered into a full batch (the wait is an hour, so no timer decides anything)."""

import asyncio
import base64
import concurrent.futures
import io
import json
import threading

import httpx
import numpy as np
import pytest
import skimage.data
import tensorflow as tf
from PIL import Image

from pipeline.serving.batching import Batcher
from pipeline.serving.rest_api import ApiError, InputSpec
from pipeline.serving.servable import Servable
from pipeline.serving.server import ServeSettings, VersionWatcher, create_app

HOUR = 3600.0


class HeldModel:
    """A servable whose first call waits for release(); it records the rows of every call and
    answers each row with its value doubled, refusing a row of -1 as the model would."""

    def __init__(self, version: int = 1, signature: str = "serving_default"):
        self.version, self.calls = version, []
        self.inputs = {signature: {"x": InputSpec(np.dtype("float32"), (None,))}}
        self._held = threading.Event()

    def release(self) -> None:
        self._held.set()

    def predict(self, signature: str, tensors: dict) -> dict:
        first = not self.calls
        self.calls.append(tensors["x"].tolist())
        if first:
            self._held.wait(60)
        if -1 in tensors["x"]:
            raise ApiError(400, "a row of -1 is refused")
        if -2 in tensors["x"]:
            raise RuntimeError("the model broke")
        return {"doubled": tensors["x"] * 2, "version": np.full(len(tensors["x"]), self.version)}


def rows(*values) -> dict:
    return {"x": np.asarray(values, dtype="float32")}


async def gathered(batcher: Batcher, model: HeldModel, held: dict, others: list[dict]) -> list:
    """Answers (or failures) of `held` (called first, so it runs alone and is held) and of
    `others`, which gather meanwhile; the model is released once they have all been asked."""
    first = asyncio.ensure_future(batcher.predict(model, "serving_default", held))
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(batcher.predict(model, "serving_default", t)) for t in others]
    await asyncio.sleep(0)
    model.release()
    return await asyncio.gather(first, *rest, return_exceptions=True)


@pytest.fixture
def pool():
    with concurrent.futures.ThreadPoolExecutor(4) as executor:
        yield executor


def test_each_request_gets_its_own_rows_from_one_call(pool):
    model = HeldModel()
    others = [rows(1), rows(2, 3), rows(4)]
    answers = asyncio.run(gathered(Batcher(pool, 4, HOUR), model, rows(9), others))
    assert model.calls == [[9], [1, 2, 3, 4]]
    assert [a["doubled"].tolist() for a in answers] == [[18], [2], [4, 6], [8]]


def test_a_refused_request_fails_alone_and_a_broken_model_fails_each(pool):
    model = HeldModel()
    others = [rows(1), rows(-1), rows(3)]
    good, one, bad, three = asyncio.run(gathered(Batcher(pool, 3, HOUR), model, rows(9), others))
    assert model.calls == [[9], [1, -1, 3], [1], [-1], [3]]
    assert isinstance(bad, ApiError) and bad.status == 400
    assert (one["doubled"].tolist(), three["doubled"].tolist()) == ([2], [6])
    model = HeldModel()
    answers = asyncio.run(gathered(Batcher(pool, 2, HOUR), model, rows(9), [rows(1), rows(-2)]))
    assert [type(a) for a in answers[1:]] == [RuntimeError, RuntimeError]
    assert model.calls == [[9], [1, -2]]


def test_versions_never_share_a_call(pool):
    old, new = HeldModel(1), HeldModel(2)
    new.release()

    async def scenario():
        batcher = Batcher(pool, 4, HOUR)
        first = asyncio.ensure_future(batcher.predict(old, "serving_default", rows(9)))
        await asyncio.sleep(0)
        asked = [(old, rows(1)), (new, rows(2)), (old, rows(3)), (new, rows(4))]
        rest = [asyncio.ensure_future(batcher.predict(m, "serving_default", t)) for m, t in asked]
        await asyncio.sleep(0)
        old.release()
        return await asyncio.gather(first, *rest)

    answers = asyncio.run(scenario())
    assert [a["version"].tolist() for a in answers] == [[1], [1], [2], [1], [2]]
    assert old.calls == [[9], [1, 3]]
    assert new.calls == [[2], [4]]  # 2 found nothing running on version 2; 4 gathered alone


def _png(image: np.ndarray) -> dict:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    return {"b64": base64.b64encode(buffer.getvalue()).decode()}


class ImageModel(HeldModel):
    """Answers each checked image with its length, held on its first call."""

    def __init__(self):
        super().__init__()
        self.inputs = {"serving_images": {"images": InputSpec(np.dtype(object), (None,))}}

    def predict(self, signature: str, tensors: dict) -> dict:
        first = not self.calls
        self.calls.append(len(tensors["images"]))
        if first:
            self._held.wait(60)
        return {"sizes": np.asarray([len(image) for image in tensors["images"]])}


def test_an_image_that_fails_to_decode_fails_its_request_alone():
    model = ImageModel()
    settings = ServeSettings(threads=4, max_batch=2, batch_wait_ms=HOUR * 1000)
    app = create_app(VersionWatcher("m", None, model, print), settings)
    photos = [_png(skimage.data.astronaut()[:64, :64]), _png(skimage.data.camera()[:64, :64])]
    not_an_image = {"b64": base64.b64encode(b"GIF89a this is not a picture").decode()}

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

            def ask(instances):
                body = {"signature_name": "serving_images", "instances": instances}
                return client.post("/v1/models/m:predict", content=json.dumps(body))

            first = asyncio.ensure_future(ask([photos[0]]))
            while not model.calls:
                await asyncio.sleep(0.01)
            rest = [
                asyncio.ensure_future(ask(x)) for x in ([photos[0]], [not_an_image], photos[1:])
            ]
            while len(model.calls) < 2:  # the two photos' requests filled a batch and started it
                await asyncio.sleep(0.01)
            model.release()
            return await asyncio.gather(first, *rest)

    first, one, bad, two = asyncio.run(scenario())
    assert bad.status_code == 400 and "images[0] is refused" in bad.json()["error"]
    assert [r.status_code for r in (first, one, two)] == [200, 200, 200]
    assert model.calls == [1, 2]
    assert one.json()["predictions"] == first.json()["predictions"]
    assert two.json()["predictions"] != one.json()["predictions"]


class Scorer(tf.Module):
    def __init__(self):
        super().__init__()
        self.weights = tf.constant(np.random.default_rng(0).normal(size=(3, 4)), tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def score(self, x):
        logits = tf.matmul(x, self.weights)
        return {"probabilities": tf.nn.softmax(logits), "class_ids": tf.argmax(logits, axis=1)}


def test_batching_off_answers_the_same(tmp_path, pool):
    module = Scorer()
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.score})
    model = tf.saved_model.load(str(tmp_path))
    servable = Servable(1, str(tmp_path), model, {}, {}, 0.0)
    inputs = [
        {"x": np.random.default_rng(n).normal(size=(n % 3 + 1, 3)).astype("float32")}
        for n in range(12)
    ]

    async def answers(batcher: Batcher) -> list:
        return await asyncio.gather(
            *(batcher.predict(servable, "serving_default", t) for t in inputs)
        )

    batched = asyncio.run(answers(Batcher(pool, 8, HOUR)))
    for off in (Batcher(pool, 1, HOUR), Batcher(pool, 8, 0)):
        for on, alone, asked in zip(batched, asyncio.run(answers(off)), inputs, strict=True):
            assert on["class_ids"].tolist() == alone["class_ids"].tolist()
            assert len(on["probabilities"]) == len(asked["x"])
            np.testing.assert_allclose(on["probabilities"], alone["probabilities"], rtol=1e-6)
