"""The test server does what the object-storage code relies on, seen through boto3 and s3fs:
conditional creates and replaces refused with 412, listings that need a refresh to see another
client's write, ETags that follow the bytes, no object until a multipart upload completes."""

import hashlib

import botocore.exceptions
import pytest
import s3fs

from vae_pipeline.domain.objects import location, put_new
from vae_pipeline_tests.object_store import fresh_bucket, refusals_without_message

MiB = 2**20


@pytest.fixture
def fs(s3_environ):
    """An s3fs file system of its own, configured by the environment alone (no endpoint argument)."""
    return s3fs.S3FileSystem(skip_instance_cache=True)


@pytest.fixture
def bucket(make_bucket):
    return make_bucket()


def refused(error: pytest.ExceptionInfo) -> tuple[int, str]:
    """Status and code of a refused request, from botocore's error or the one s3fs translated."""
    cause = error.value if isinstance(error.value, botocore.exceptions.ClientError) else error.value.__cause__
    return cause.response["ResponseMetadata"]["HTTPStatusCode"], cause.response["Error"]["Code"]


def test_s3fs_and_boto3_reach_the_server_through_the_environment_alone(fs, bucket, s3_environ):
    import boto3

    assert boto3.client("s3").meta.endpoint_url == s3_environ["AWS_ENDPOINT_URL"]
    boto3.client("s3").put_object(Bucket=bucket, Key="from-boto3", Body=b"b")
    fs.pipe_file(f"{bucket}/from-s3fs", b"s")
    assert sorted(fs.ls(bucket, refresh=True)) == [f"{bucket}/from-boto3", f"{bucket}/from-s3fs"]


def test_a_second_create_is_refused_and_the_first_bytes_stay(fs, bucket, s3_client):
    fs.pipe_file(f"{bucket}/generation", b"first", mode="create")
    with pytest.raises(FileExistsError) as by_s3fs:
        fs.pipe_file(f"{bucket}/generation", b"second", mode="create")
    assert refused(by_s3fs) == (412, "PreconditionFailed")
    with pytest.raises(botocore.exceptions.ClientError) as by_boto3:
        s3_client.put_object(Bucket=bucket, Key="generation", Body=b"third", IfNoneMatch="*")
    assert refused(by_boto3) == (412, "PreconditionFailed")
    assert s3_client.get_object(Bucket=bucket, Key="generation")["Body"].read() == b"first"
    assert fs.cat_file(f"{bucket}/generation") == b"first"


def test_a_replace_with_a_stale_etag_is_refused_and_with_the_current_one_succeeds(fs, bucket, s3_client):
    path = f"{bucket}/pointer"
    fs.pipe_file(path, b"v1")
    stale = fs.info(path)["ETag"]
    s3_client.put_object(Bucket=bucket, Key="pointer", Body=b"v2 by another writer")
    current = s3_client.head_object(Bucket=bucket, Key="pointer")["ETag"]
    assert current != stale

    with pytest.raises(OSError) as by_s3fs:
        fs.pipe_file(path, b"v3 from s3fs", IfMatch=stale)
    assert refused(by_s3fs) == (412, "PreconditionFailed")
    with pytest.raises(botocore.exceptions.ClientError) as by_boto3:
        s3_client.put_object(Bucket=bucket, Key="pointer", Body=b"v3 from boto3", IfMatch=stale)
    assert refused(by_boto3) == (412, "PreconditionFailed")
    assert fs.cat_file(path) == b"v2 by another writer"

    fs.pipe_file(path, b"v3 from s3fs", IfMatch=current)
    assert fs.cat_file(path) == b"v3 from s3fs"
    newest = s3_client.head_object(Bucket=bucket, Key="pointer")["ETag"]
    s3_client.put_object(Bucket=bucket, Key="pointer", Body=b"v4 from boto3", IfMatch=newest)
    assert s3_client.get_object(Bucket=bucket, Key="pointer")["Body"].read() == b"v4 from boto3"


def test_another_clients_write_is_listed_only_after_the_cache_is_invalidated(fs, bucket, s3_client):
    fs.pipe_file(f"{bucket}/tables/a.parquet", b"a")
    assert fs.ls(f"{bucket}/tables") == [f"{bucket}/tables/a.parquet"]
    s3_client.put_object(Bucket=bucket, Key="tables/b.parquet", Body=b"b")
    # s3fs answers from its listing cache: the new key is missing, which is why readers refresh
    assert fs.ls(f"{bucket}/tables") == [f"{bucket}/tables/a.parquet"]
    assert not fs.exists(f"{bucket}/tables/b.parquet")
    fs.invalidate_cache(f"{bucket}/tables")
    assert sorted(fs.ls(f"{bucket}/tables")) == [f"{bucket}/tables/a.parquet", f"{bucket}/tables/b.parquet"]
    assert fs.exists(f"{bucket}/tables/b.parquet")


def test_etag_follows_the_bytes(fs, bucket, s3_client):
    fs.pipe_file(f"{bucket}/one", b"same bytes")
    s3_client.put_object(Bucket=bucket, Key="two", Body=b"same bytes")
    first = fs.info(f"{bucket}/one")["ETag"]
    assert s3_client.head_object(Bucket=bucket, Key="two")["ETag"] == first
    fs.pipe_file(f"{bucket}/one", b"same bytes")  # rewritten, unchanged
    fs.invalidate_cache(f"{bucket}/one")
    assert fs.info(f"{bucket}/one")["ETag"] == first
    s3_client.put_object(Bucket=bucket, Key="two", Body=b"other bytes")
    assert s3_client.head_object(Bucket=bucket, Key="two")["ETag"] != first
    # a single-part upload's ETag is the quoted MD5 of its bytes (what a writer can compute first)
    assert first == f'"{hashlib.md5(b"same bytes").hexdigest()}"'


def test_an_unfinished_multipart_upload_leaves_no_object(fs, bucket, s3_client):
    upload = s3_client.create_multipart_upload(Bucket=bucket, Key="archive.tar")
    part = s3_client.upload_part(Bucket=bucket, Key="archive.tar", UploadId=upload["UploadId"], PartNumber=1,
                                 Body=b"x" * 1024)
    assert [u["Key"] for u in s3_client.list_multipart_uploads(Bucket=bucket)["Uploads"]] == ["archive.tar"]
    assert s3_client.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    with pytest.raises(botocore.exceptions.ClientError) as missing:
        s3_client.head_object(Bucket=bucket, Key="archive.tar")
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert not fs.exists(f"{bucket}/archive.tar")
    assert fs.ls(bucket, refresh=True) == []

    s3_client.complete_multipart_upload(Bucket=bucket, Key="archive.tar", UploadId=upload["UploadId"],
                                        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    fs.invalidate_cache(bucket)
    assert fs.cat_file(f"{bucket}/archive.tar") == b"x" * 1024


def test_an_s3fs_file_being_written_in_parts_is_invisible_until_closed(fs, bucket, s3_client):
    path = f"{bucket}/frames.tar"
    data = b"\x00" * (5 * MiB) + b"tail"
    with fs.open(path, "wb", block_size=5 * MiB) as out:
        out.write(data)  # past one block: s3fs starts a multipart upload and sends the first part
        assert [u["Key"] for u in s3_client.list_multipart_uploads(Bucket=bucket)["Uploads"]] == ["frames.tar"]
        assert s3_client.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
        assert fs.ls(bucket, refresh=True) == []
    assert s3_client.get_object(Bucket=bucket, Key="frames.tar")["Body"].read() == data
    assert "Uploads" not in s3_client.list_multipart_uploads(Bucket=bucket)


def test_a_bucket_is_deleted_with_its_versions_markers_and_pending_uploads(s3_endpoint, s3_client):
    with fresh_bucket(s3_endpoint, versioned=True) as name:  # what make_bucket's teardown runs
        for body in (b"1", b"2"):
            s3_client.put_object(Bucket=name, Key="k", Body=body)
        s3_client.delete_object(Bucket=name, Key="k")  # a delete marker over the two versions
        s3_client.create_multipart_upload(Bucket=name, Key="pending")
        listed = s3_client.list_object_versions(Bucket=name)
        assert (len(listed["Versions"]), len(listed["DeleteMarkers"])) == (2, 1)
        assert name in [b["Name"] for b in s3_client.list_buckets()["Buckets"]]
    assert name not in [b["Name"] for b in s3_client.list_buckets()["Buckets"]]


def test_a_412_with_no_message_is_a_refused_conditional_write(s3_endpoint, s3_environ, bucket, s3_client, monkeypatch):
    """Before: Ceph's RGW refuses with an empty message, s3fs raised `OSError: [Errno 22] None`, and
    the project took it for a failure instead of the refusal it is (it looked for "precondition")."""
    with refusals_without_message(s3_endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy)
        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        with pytest.raises(OSError) as raw:  # what s3fs makes of it: no FileExistsError, no message
            fs.pipe_file(f"{bucket}/raw", b"1", mode="create")
            fs.pipe_file(f"{bucket}/raw", b"2", mode="create")
        assert type(raw.value) is OSError and str(raw.value) == "[Errno 22] None"
        assert refused(raw) == (412, "PreconditionFailed")

        s3fs.S3FileSystem.clear_instance_cache()  # the project's paths: a file system for the proxy
        try:
            path = location(f"s3://{bucket}/pointer")
            assert put_new(path, b"first") is True
            assert path.fs.s3.meta.endpoint_url == proxy
            assert put_new(path, b"second") is False
        finally:
            s3fs.S3FileSystem.clear_instance_cache()  # none of the later tests reach the closed proxy
    assert s3_client.get_object(Bucket=bucket, Key="pointer")["Body"].read() == b"first"
