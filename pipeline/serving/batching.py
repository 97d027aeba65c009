"""Dynamic batching for `imgpipe serve`: concurrent :predict requests on the same version and
signature, with tensors of the same kind, run as one model call, as TensorFlow Serving's
batching does; each request gets its own rows back.

A request that finds no call of its version and signature running starts one at once, so a lone
request never waits. While calls run, the requests that arrive gather for up to `max_wait`
seconds or until they hold `max_rows` rows; a running call ending starts the gathered ones at
once. A batch holds the servable its requests were given, so a version swapped in meanwhile
never mixes with the previous one. Images were checked per request before they get here, so a
refused image fails its request alone; the model refusing a batch (a 400) runs its requests one
by one so the refusal reaches only the request it is about, and any other failure reaches each
request of the batch.
"""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np

from pipeline.serving.rest_api import ApiError
from pipeline.serving.servable import Servable


@dataclasses.dataclass
class _Batch:
    servable: Servable
    signature: str
    requests: list[tuple[dict[str, np.ndarray], asyncio.Future]] = dataclasses.field(
        default_factory=list
    )
    rows: int = 0
    timer: asyncio.TimerHandle | None = None


class Batcher:
    """Gathers predict calls into batches and runs each batch once on the executor."""

    def __init__(self, executor, max_rows: int, max_wait: float):
        self._executor, self._max_rows, self._max_wait = executor, max_rows, max_wait
        self._gathering: dict[tuple, _Batch] = {}
        self._running: dict[tuple, int] = {}  # batch key -> calls under way

    @property
    def enabled(self) -> bool:
        return self._max_rows > 1 and self._max_wait > 0

    async def predict(
        self, servable: Servable, signature: str, tensors: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The signature's outputs for these tensors' rows, computed alone or in a batch."""
        loop = asyncio.get_running_loop()
        rows = _rows(tensors)
        if not self.enabled or rows is None or rows >= self._max_rows:
            return await loop.run_in_executor(self._executor, servable.predict, signature, tensors)
        key = (id(servable), signature, _kind(tensors))
        batch = self._gathering.get(key)
        if batch is not None and batch.rows + rows > self._max_rows:
            self._start(key)
            batch = None
        if batch is None:
            batch = self._gathering[key] = _Batch(servable, signature)
            batch.timer = loop.call_later(self._max_wait, self._start, key, batch)
        answer = loop.create_future()
        batch.requests.append((tensors, answer))
        batch.rows += rows
        if batch.rows >= self._max_rows or not self._running.get(key):
            self._start(key)
        return await answer

    def _start(self, key: tuple, batch: _Batch | None = None) -> None:
        """Runs the batch gathering under key (if it is still batch, when batch is named)."""
        if batch is not None and self._gathering.get(key) is not batch:
            return
        batch = self._gathering.pop(key)
        batch.timer.cancel()
        self._running[key] = self._running.get(key, 0) + 1
        asyncio.get_running_loop().create_task(self._run(key, batch))

    async def _run(self, key: tuple, batch: _Batch) -> None:
        loop = asyncio.get_running_loop()
        try:
            answers = await loop.run_in_executor(self._executor, _compute, batch)
        except Exception as error:  # noqa: BLE001  each request of the batch gets the failure
            answers = [error] * len(batch.requests)
        finally:
            self._running[key] -= 1
            if not self._running[key]:
                del self._running[key]
                if key in self._gathering:
                    self._start(key)
        for (_, answer), result in zip(batch.requests, answers, strict=True):
            if answer.done():
                continue
            if isinstance(result, Exception):
                answer.set_exception(result)
            else:
                answer.set_result(result)


def _rows(tensors: dict[str, np.ndarray]) -> int | None:
    """The batch size the tensors share, None if they share none (not batched then)."""
    sizes = {array.shape[0] if array.ndim else None for array in tensors.values()}
    return sizes.pop() if len(sizes) == 1 and None not in sizes else None


def _kind(tensors: dict[str, np.ndarray]) -> tuple:
    """What tensors must share to be stacked: their names, dtypes and shapes after the rows."""
    return tuple(sorted((name, a.dtype.str, a.shape[1:]) for name, a in tensors.items()))


def _compute(batch: _Batch) -> list[dict[str, np.ndarray] | Exception]:
    """Each request's outputs (or its failure), from one model call on all their rows."""
    parts = [tensors for tensors, _ in batch.requests]
    if len(parts) == 1:
        return [batch.servable.predict(batch.signature, parts[0])]
    stacked = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    try:
        outputs = batch.servable.predict(batch.signature, stacked)
    except ApiError:
        return [_alone(batch, part) for part in parts]
    if any(array.ndim == 0 or array.shape[0] != batch.rows for array in outputs.values()):
        return [_alone(batch, part) for part in parts]  # outputs not one row per input row
    bounds = np.cumsum([_rows(part) for part in parts])[:-1]
    split = {name: np.split(array, bounds) for name, array in outputs.items()}
    return [{name: pieces[i] for name, pieces in split.items()} for i in range(len(parts))]


def _alone(batch: _Batch, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray] | Exception:
    try:
        return batch.servable.predict(batch.signature, tensors)
    except ApiError as error:
        return error
