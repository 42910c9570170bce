"""The artefact store on S3 (moto's server from ``scripts/dev_services.sh``, on 127.0.0.1).

``TEMPO_ARTEFACTS=s3://bucket/prefix`` opens an ``ObjectLocation``; the client goes to
``$AWS_ENDPOINT_URL``. The value is written before the pointer (``artefact.json``), a crash
between the two leaves the previous artefact readable, and the sha256 is verified on read.
"""
import uuid

import boto3
import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.storage import artefacts
from tempo_assets.core.storage.artefact_types import Embeddings
from tempo_assets.core.storage.artefacts import ArtefactStore, ObjectLocation
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.resources import open_artefact_store
from tempo_assets_tests.core.test_artefacts import BINDING, frame

pytestmark = pytest.mark.production

S3_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


@pytest.fixture
def s3(dev_services, monkeypatch):
    """A fresh prefix of the session's bucket: (url, boto3 client, bucket, prefix)."""
    for name in S3_VARIABLES:
        monkeypatch.setenv(name, dev_services[name])
    bucket = dev_services["TEMPO_ARTEFACTS"].removeprefix("s3://").split("/", 1)[0]
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=dev_services["AWS_ENDPOINT_URL"])
    return f"s3://{bucket}/{prefix}", client, bucket, prefix


def keys(client, bucket, prefix):
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    return sorted(o["Key"].removeprefix(prefix + "/") for o in listed.get("Contents", []))


def test_values_round_trip_on_the_endpoint_and_old_versions_are_collected(s3):
    url, client, bucket, prefix = s3
    store = ArtefactStore(url)
    assert isinstance(store.location, ObjectLocation)
    first = store.write("a", "k", frame(3), BINDING)
    # the objects are on the server $AWS_ENDPOINT_URL names, value and pointer
    assert keys(client, bucket, prefix) == [f"a/k/{artefacts.SIDECAR}", f"a/k/{first['file']}"]
    embeddings = Embeddings(ids=["P1", "P2"], matrix=np.arange(6, dtype=np.float32).reshape(2, 3),
                            embedder_id="kmer-3")
    store.write("e", None, embeddings, BINDING)
    again = ArtefactStore(url)  # another process's view: no cached listing
    pd.testing.assert_frame_equal(again.open("a", "k").value, frame(3))
    read = again.open("e", None).value
    assert read.ids == embeddings.ids and np.array_equal(read.matrix, embeddings.matrix)
    assert read.embedder_id == "kmer-3"
    for n in (4, 5, 6):
        store.write("a", "k", frame(n), BINDING)
    versions = store.location.list(f"a/k/{artefacts.VERSIONS}")
    assert len(versions) == 2 and store.read_meta("a", "k")["version"] in versions
    pd.testing.assert_frame_equal(again.open("a", "k").value, frame(6))


def test_a_crash_before_the_pointer_leaves_the_previous_artefact(s3, monkeypatch):
    url, client, bucket, prefix = s3
    store = ArtefactStore(url)
    first = store.write("a", "k", frame(3), BINDING)
    original = ObjectLocation.write_bytes

    def crash_on_pointer(self, key, data):
        if key.endswith(artefacts.SIDECAR):
            raise KeyboardInterrupt("killed between the value and the pointer")
        return original(self, key, data)

    monkeypatch.setattr(ObjectLocation, "write_bytes", crash_on_pointer)
    with pytest.raises(KeyboardInterrupt):
        store.write("a", "k", frame(5, offset=10), BINDING)
    monkeypatch.setattr(ObjectLocation, "write_bytes", original)
    # the new value is on the server, but the pointer still names the first one
    assert len(store.location.list(f"a/k/{artefacts.VERSIONS}")) == 2
    current = ArtefactStore(url).open("a", "k")
    assert current.meta["sha256"] == first["sha256"]
    pd.testing.assert_frame_equal(current.value, frame(3))


def test_a_tampered_object_is_refused_naming_its_url(s3):
    url, client, bucket, prefix = s3
    store = ArtefactStore(url)
    meta = store.write("a", "k", frame(3), BINDING)
    key = f"{prefix}/a/k/{meta['file']}"
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    client.put_object(Bucket=bucket, Key=key, Body=body + b"\0")
    with pytest.raises(TempoInputError, match="sha256 mismatch") as caught:
        ArtefactStore(url).open("a", "k").value
    assert f"{url}/a/k/{meta['file']}" in str(caught.value)
    with pytest.raises(TempoInputError, match="no artefact a\\[other\\]") as missing:
        store.open("a", "other")
    assert f"{url}/a/other/{artefacts.SIDECAR}" in str(missing.value)


def test_tempo_artefacts_url_opens_the_object_store_with_local_extras(s3, monkeypatch, tmp_path):
    url, client, bucket, prefix = s3
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TEMPO_ARTEFACTS", url)
    store = open_artefact_store()
    assert str(store.location) == url
    # HTML reports and manifests beside artefacts stay local files
    assert store.folder("benchmark", "w") == tmp_path / "home" / "artefacts" / "benchmark" / "w"
    store.write("a", None, frame(2), BINDING)
    assert keys(client, bucket, prefix)[0] == f"a/__unpartitioned__/{artefacts.SIDECAR}"
    assert not (tmp_path / "home" / "artefacts" / "a").exists()
    with pytest.raises(TempoInputError, match="no local folder"):
        ArtefactStore(url).folder("benchmark", "w")


def test_an_unknown_scheme_is_refused_naming_the_url():
    with pytest.raises(TempoInputError, match="nosuch://bucket/x.*cannot open the artefact store"):
        ArtefactStore("nosuch://bucket/x")


def test_an_object_store_without_its_filesystem_package_names_the_setup_command(monkeypatch):
    location = ObjectLocation("s3://bucket/x")

    class NoFilesystem:  # fsspec raises this when s3fs is not installed
        path = "bucket/x"

        @property
        def fs(self):
            raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(location, "root", NoFilesystem())
    with pytest.raises(TempoInputError, match=r"TEMPO_ARTEFACTS=s3://bucket/x needs the production extra "
                                              r"\(Install s3fs to access S3\): run `bash scripts/setup.sh --production`"):
        location.check()
