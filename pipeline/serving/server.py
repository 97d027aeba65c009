"""`imgpipe serve`: a pushed model behind TensorFlow Serving's REST API, on uvicorn.

The paths are TensorFlow Serving's, matched as it matches them:
  GET  /v1/models/NAME[/versions/N]            model_version_status (AVAILABLE, or LOADING)
  GET  /v1/models/NAME[/versions/N]/metadata   the signatures with their inputs and outputs
  POST /v1/models/NAME[/versions/N]:predict    rows (`instances`) or columns (`inputs`)
Bodies are pipeline/serving/rest_api.py's; any other /v1/ path is a malformed request (400).

Hot reload, as TensorFlow Serving polls its base path: a watcher thread asks the serving
folder which version to serve (components/serving/versions.py) every few seconds; another
version is loaded and warmed up in that thread while the current one keeps answering, then
swapped in with one assignment. A version that fails to load or to answer its warmup is not
served (the current one stays) and is tried again only once its files change. Requests run on
a fixed pool of threads: TensorFlow releases the interpreter while it computes, and each thread
keeps one supervised image-check child (data_prep/runtime/supervised.py). Each request's body
and images are checked on its own; concurrent requests then share model calls
(pipeline/serving/batching.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import re
import threading
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from components.serving.versions import served_version, version_dir
from data_prep.reading.image_validation import ImageLimits
from pipeline.serving import rest_api
from pipeline.serving.batching import Batcher
from pipeline.serving.rest_api import BAD_REQUEST, NOT_FOUND, TOO_LARGE, ApiError
from pipeline.serving.servable import NotServable, Servable, checked_images, load_servable

LOGGER = logging.getLogger(__name__)
PREDICT_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?:(\w+)", re.IGNORECASE)
STATUS_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+))?(/metadata)?", re.IGNORECASE)
MAX_BATCH, BATCH_WAIT_MS = 8, 5.0  # measured with `make bench PARTS=serve`: docs/models.md


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """How `imgpipe serve` answers.

    Attributes:
      max_request_bytes: a request body above this gets 413 before it is parsed.
      poll_seconds: how often the serving folder is looked at for another version.
      threads: requests computed at once.
      max_batch: rows of concurrent requests run as one model call; 1 runs each alone.
      batch_wait_ms: how long a request waits for others while a model call runs; 0 runs
        each alone.
      limits: the ingest's per-image limits, applied to every image before it is decoded.
    """

    max_request_bytes: int = 32 * 1024 * 1024
    poll_seconds: float = 2.0
    threads: int = 4
    max_batch: int = MAX_BATCH
    batch_wait_ms: float = BATCH_WAIT_MS
    limits: ImageLimits = ImageLimits()

    def validate(self) -> ServeSettings:
        if self.max_request_bytes < 1:
            raise ValueError(
                f"--max-request-bytes must be at least 1, got {self.max_request_bytes}"
            )
        if self.poll_seconds <= 0:
            raise ValueError(f"--poll-seconds must be above 0, got {self.poll_seconds}")
        if self.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {self.threads}")
        if self.max_batch < 1:
            raise ValueError(f"--max-batch must be at least 1, got {self.max_batch}")
        if self.batch_wait_ms < 0:
            raise ValueError(f"--batch-wait-ms must be 0 or more, got {self.batch_wait_ms}")
        return self


class VersionWatcher:
    """The served version of one model, and the one being loaded to replace it."""

    def __init__(
        self,
        name: str,
        base_directory: str | None,
        first: Servable,
        say: Callable[[str], None],
        load: Callable[[int, str], Servable] = load_servable,
    ):
        self.name, self._base, self._say, self._load = name, base_directory, say, load
        self.current = first
        self.loading: int | None = None
        self._refused: dict[int, tuple] = {}  # version -> its files' stats when it failed

    def poll(self) -> None:
        """Loads and swaps in the version the folder now names, if it is another one."""
        wanted = served_version(self._base) if self._base else None
        if wanted is None or wanted == self.current.version:
            return
        folder = version_dir(self._base, wanted)
        files = _file_stats(folder)
        if self._refused.get(wanted) == files:
            return
        self.loading = wanted
        try:
            servable = self._load(wanted, folder)
        except NotServable as problem:
            self._refused[wanted] = files
            self._say(f"{problem}; version {self.current.version} keeps serving")
            return
        finally:
            self.loading = None
        previous, self.current = self.current, servable
        self._say(
            f"version {servable.version} serves now (loaded and warmed up in "
            f"{servable.load_seconds:.1f} s), in place of version {previous.version}"
        )

    def watch(self, stop: threading.Event, seconds: float) -> None:
        while not stop.wait(seconds):
            try:
                self.poll()
            except Exception:  # noqa: BLE001  the watcher outlives any one bad look at the folder
                LOGGER.exception("looking for a new version of %s failed", self.name)


def _file_stats(folder: str) -> tuple:
    stats = []
    for directory, _, names in os.walk(folder):
        for name in sorted(names):
            info = os.stat(os.path.join(directory, name))
            stats.append((directory, name, info.st_size, info.st_mtime_ns))
    return tuple(sorted(stats))


def create_app(watcher: VersionWatcher, settings: ServeSettings) -> Starlette:
    """The ASGI app answering TensorFlow Serving's REST paths for watcher's model."""
    pool = concurrent.futures.ThreadPoolExecutor(settings.threads, "imgpipe-serve")
    batcher = Batcher(pool, settings.max_batch, settings.batch_wait_ms / 1000)

    async def handle(request: Request) -> Response:
        try:
            body = await _dispatch(request, watcher, settings, pool, batcher)
            status = 200
        except ApiError as error:
            body, status = error.body(), error.status
        except Exception as error:  # noqa: BLE001  one request's failure is its own answer
            LOGGER.exception("request %s %s failed", request.method, request.url.path)
            body, status = {"error": f"{type(error).__name__}: {error}"}, rest_api.INTERNAL
        return Response(json.dumps(body), status, media_type="application/json")

    return Starlette(routes=[Route("/v1/{path:path}", handle, methods=["GET", "POST"])])


async def _dispatch(request: Request, watcher, settings: ServeSettings, pool, batcher) -> dict:
    path, method = request.url.path, request.method
    if method == "POST" and (match := PREDICT_PATH.fullmatch(path)):
        name, version, verb = match.groups()
        if verb.lower() != "predict":
            raise ApiError(501, f"imgpipe serve answers :predict, not :{verb}")
        servable = _servable(watcher, name, version)
        body = await _body(request, settings.max_request_bytes)
        loop = asyncio.get_running_loop()
        parsed, tensors = await loop.run_in_executor(
            pool, _predict_inputs, servable, body, settings.limits
        )
        outputs = await batcher.predict(servable, parsed.signature_name, tensors)
        return rest_api.response_body(outputs, parsed.row_format)
    if method == "GET" and (match := STATUS_PATH.fullmatch(path)):
        name, version, metadata = match.groups()
        servable = _servable(watcher, name, version, loading_counts=not metadata)
        if metadata:
            spec = {"name": name, "signature_name": "", "version": str(servable.version)}
            return {"model_spec": spec, "metadata": {"signature_def": servable.metadata}}
        return {"model_version_status": _status(watcher, version)}
    raise ApiError(BAD_REQUEST, f"Malformed request: {method} {path}")


def _servable(watcher, name: str, version: str | None, loading_counts: bool = False) -> Servable:
    current = watcher.current
    asked = f"Specific({name}, {version})" if version else f"Latest({name})"
    if name != watcher.name:
        raise ApiError(NOT_FOUND, f"Servable not found for request: {asked}")
    if version and int(version) != current.version:
        if loading_counts and watcher.loading == int(version):
            return current
        raise ApiError(NOT_FOUND, f"Servable not found for request: {asked}")
    return current


def _status(watcher, version: str | None) -> list[dict]:
    ok = {"error_code": "OK", "error_message": ""}
    states = [(watcher.current.version, "AVAILABLE")]
    if watcher.loading is not None:
        states.append((watcher.loading, "LOADING"))
    return [
        {"version": str(number), "state": state, "status": ok}
        for number, state in states
        if version is None or int(version) == number
    ]


async def _body(request: Request, limit: int) -> bytes:
    too_large = ApiError(TOO_LARGE, f"the request body is over the limit of {limit} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _predict_inputs(
    servable: Servable, body: bytes, limits: ImageLimits
) -> tuple[rest_api.PredictRequest, dict]:
    """The parsed request and its checked tensors; raises ApiError (400) naming what is wrong."""
    request = rest_api.read_predict_request(body)
    specs = servable.inputs.get(request.signature_name)
    if specs is None:
        raise ApiError(
            BAD_REQUEST,
            f'Serving signature name: "{request.signature_name}" not found in signature def',
        )
    return request, checked_images(rest_api.request_tensors(request, specs), limits)


def run(listener, watcher: VersionWatcher, settings: ServeSettings) -> None:
    """Answers on the listening socket until interrupted, watching for new versions meanwhile."""
    import uvicorn

    stop = threading.Event()
    threading.Thread(
        target=watcher.watch,
        args=(stop, settings.poll_seconds),
        name="imgpipe-serve-watch",
        daemon=True,
    ).start()
    config = uvicorn.Config(
        create_app(watcher, settings),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,
    )
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        stop.set()
