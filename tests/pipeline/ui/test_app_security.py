"""The app answers only for its own host names, sends its security headers on every page,
treats ids beyond int64 as unknown, keeps a label review only from its own form, and hashes
for the image search only files under the store's data folders, read as regular files of
bounded size."""

import hashlib
import os
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline.ui import app as ui_app


def _store_with_data_root(root: str):
    """A store in memory whose one IngestReport names `root` as its input."""
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    store = metadata_store.MetadataStore(config)
    type_id = store.put_artifact_type(mlmd_pb2.ArtifactType(name="IngestReport"))
    report = mlmd_pb2.Artifact(type_id=type_id, uri="/nowhere")
    report.custom_properties[metadata_keys.INGEST_INPUT_PROPERTY].string_value = root
    store.put_artifacts([report])
    return store


@pytest.fixture
def data_root(tmp_path):
    root = tmp_path / "images"
    (root / "cat").mkdir(parents=True)
    (root / "cat" / "1.jpg").write_bytes(b"cat bytes")
    os.mkfifo(root / "cat" / "pipe.jpg")
    os.symlink("/etc/passwd", root / "cat" / "passwd.jpg")
    return root


@pytest.fixture
def client(data_root):
    store = _store_with_data_root(str(data_root))
    return ui_app.create_app(lambda: store, "memory").test_client()


def test_every_page_carries_the_security_headers(client):
    for url in ("/", "/lineage/model/1", "/no/such/page"):
        headers = client.get(url).headers
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        policy = dict(
            part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";")
        )
        assert policy["script-src"] == "'self'"  # the app's own chart scripts, nothing inline


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example"])
def test_a_foreign_host_is_refused(client, host):
    response = client.get("/", headers={"Host": host})
    assert response.status_code == 400
    assert b"does not answer for host" in response.data


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"])
def test_the_loopback_names_are_answered(client, host):
    assert client.get("/lineage?image=x", headers={"Host": host}).status_code == 200


def test_bound_to_every_interface_an_address_literal_is_answered():
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    store = metadata_store.MetadataStore(config)
    client = ui_app.create_app(lambda: store, "memory", "0.0.0.0").test_client()
    page = "/lineage?image=x"
    assert client.get(page, headers={"Host": "192.0.2.7:8765"}).status_code == 200
    assert client.get(page, headers={"Host": "rebound.example"}).status_code == 400


@pytest.mark.parametrize(
    "url",
    [
        "/lineage/model/99999999999999999999999",
        "/lineage/examples/9223372036854775808",
        "/lineage/model/5",
        "/lineage/examples/5",
        "/run/no-such-run",
        "/run/no-such-run/mistake/99999999999999999999.jpg",
    ],
)
def test_big_or_unknown_ids_are_not_found(client, url):
    assert client.get(url).status_code == 404


def test_the_image_search_hashes_a_file_under_the_data_folder(client, data_root):
    page = client.get("/lineage", query_string={"image": str(data_root / "cat" / "1.jpg")})
    assert page.status_code == 200
    assert hashlib.sha256(b"cat bytes").hexdigest().encode() in page.data


@pytest.mark.parametrize(
    "image", ["/etc/passwd", "/dev/zero", "{root}/cat/pipe.jpg", "{root}/cat/passwd.jpg"]
)
def test_the_image_search_never_reads_outside_the_data_folder_or_special_files(
    client, data_root, image
):
    page = client.get("/lineage", query_string={"image": image.format(root=data_root)})
    assert page.status_code == 200
    assert b"not readable here" in page.data
    with open("/etc/passwd", "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest().encode() not in page.data


@pytest.mark.slow
def test_a_mark_is_kept_only_from_this_servers_form_for_this_host(reviewed):
    """The review file is written only by a POST carrying the page's token, for one of the
    run's suspects, with a known verdict, through a Host the app answers."""
    from tests.pipeline.ui.conftest import SUSPECT

    url = f"{reviewed.url}/run/{reviewed.run_id}/health"
    with urllib.request.urlopen(url) as response:
        token = re.search(r'name="token" value="([^"]+)"', response.read().decode()).group(1)

    def post(host: str | None = None, **fields) -> int:
        body = urllib.parse.urlencode({"path": SUSPECT, "verdict": "wrong", **fields}).encode()
        request = urllib.request.Request(url + "/review", data=body, method="POST")
        if host:
            request.add_header("Host", host)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    before = _read_or_none(reviewed.review_path)
    assert post() == 403  # no token: a page elsewhere cannot post a mark
    assert post(token="x" * len(token)) == 403
    assert post(host="attacker.example", token=token) == 400
    assert post(token=token, path="dog/1.jpg") == 404  # not a suspect
    assert post(token=token, verdict="maybe") == 400
    assert _read_or_none(reviewed.review_path) == before
    assert post(token=token) == 303
    assert f'"{SUSPECT}"' in _read_or_none(reviewed.review_path)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is the answer to look at, not one to follow."""

    def redirect_request(self, *args, **kwargs):
        return None


def _read_or_none(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return None
