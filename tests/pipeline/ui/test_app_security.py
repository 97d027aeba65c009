"""The app answers only for its own host names, sends its security headers on every page,
treats ids beyond int64 as unknown, and hashes for the image search only files under the
store's data folders, read as regular files of bounded size."""

import hashlib
import os

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
