"""Where the platform's files live: Django's storage API (STORAGES), never a path.

Two storages, named for what they hold (config/settings.py builds them from the environment):

    storages["imports"]   uploaded JSON Lines files: <study slug>/<import id>/upload.jsonl
    storages["exports"]   dataset exports: <study slug>/<export id>/dataset.zip and dataset/...

STORAGE_BACKEND=local (the default) keeps them on this machine's disk, under IMPORTS_DIR and
EXPORTS_DIR (var/imports and var/exports when unset): one machine, or machines sharing a
disk. STORAGE_BACKEND=s3 keeps them in one bucket of an S3-compatible object store
(S3_BUCKET, S3_REGION, S3_ENDPOINT_URL for MinIO and others, credentials from boto3's own
chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the machine's role), under the prefixes
imports/ and exports/: machines that share no disk. docs/deployment.md has the settings.
The object store's client waits at most S3_CONNECT_TIMEOUT for a connection and
S3_READ_TIMEOUT for an answer, S3_MAX_ATTEMPTS tries in all (config/settings.py); a store
that cannot be reached in a request is a 503 (StorageUnavailableError), never a 500.

Web processes stream downloads from the storage after their permission checks (no
presigned URLs: see `open_for_download`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages

from core.exceptions import ApplicationError

logger = logging.getLogger(__name__)

BLOCK = 1 << 20


class StorageUnavailableError(ApplicationError):
    """The object store could not be reached, or gave no answer in time (503)."""

    code = "storage_unavailable"
    http_status = 503


def _unreachable(storage: Storage) -> tuple[type[Exception], ...]:
    """The errors of `storage` that say it cannot be reached or did not answer: botocore's
    connection errors and timeouts for an object store, none for the local disk (botocore
    is imported only where it is used)."""
    if isinstance(storage, FileSystemStorage):
        return ()
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    return (BotoConnectionError, HTTPClientError)


def _unavailable(exc: Exception) -> StorageUnavailableError:
    logger.error("the file storage could not be reached: %s", exc)
    return StorageUnavailableError("The file storage is unavailable: nothing was stored. Try again later.")


class LocalRunStorage(FileSystemStorage):
    """The local file system under a folder named by a setting (IMPORTS_DIR, EXPORTS_DIR),
    read when used rather than when built, so a changed setting (a test's tmp_path) is
    seen at once; var/<default> under the project when the setting is unset."""

    def __init__(self, *, setting: str, default: str, **kwargs):
        self._setting, self._default = setting, default
        super().__init__(**kwargs)

    @property
    def base_location(self):  # FileSystemStorage caches these; a setting may change
        return str(getattr(settings, self._setting, None) or Path(settings.BASE_DIR) / "var" / self._default)

    @property
    def location(self):
        return os.path.abspath(self.base_location)

    def deconstruct(self):  # pragma: no cover - storages are never in migrations here
        return ("core.storage.LocalRunStorage", (), {"setting": self._setting, "default": self._default})


def imports_storage() -> Storage:
    return storages["imports"]


def exports_storage() -> Storage:
    return storages["exports"]


def save_upload(storage: Storage, name: str, upload: File, *, limit: int, too_large) -> int:
    """Store the received file `upload` (a request's UploadedFile, or any Django File) as
    `name` and return its size in bytes. Its size is known before anything is written
    (Django counted the bytes as they came), so a file over `limit` is refused by calling
    `too_large(limit)` (which raises) and nothing of it is stored; an empty one is not
    stored either (0); an object store that cannot be reached is StorageUnavailableError
    (503). The storage receives the file as it is, whole: a local one writes an
    upload held in memory once and moves one Django spooled to disk, an object store
    uploads it (in parts when it is large), with no copy of our own first."""
    size = upload.size
    if size > limit:
        too_large(limit)
    if size == 0:
        return 0
    upload.seek(0)
    try:
        stored = storage.save(name, upload)
    except _unreachable(storage) as exc:
        raise _unavailable(exc) from None
    if stored != name:  # a name taken already: the ids are UUIDs, so this is a bug
        storage.delete(stored)
        raise FileExistsError(name)
    return size


def save_file(storage: Storage, name: str, path: Path) -> None:
    """Store the local file `path` as `name`, replacing any file of that name (a run taken
    over by another worker writes its files again, whole)."""
    if storage.exists(name):
        storage.delete(name)
    with path.open("rb") as handle:
        stored = storage.save(name, File(handle, name=path.name))
    if stored != name:
        storage.delete(stored)
        raise FileExistsError(name)


def save_folder(storage: Storage, prefix: str, folder: Path) -> int:
    """Store every file under the local `folder` as <prefix>/<its relative path>; returns how many."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        save_file(storage, f"{prefix}/{path.relative_to(folder).as_posix()}", path)
    return len(files)


def delete_tree(storage: Storage, prefix: str) -> int:
    """Delete every file under `prefix` (a run's folder); returns how many. On the local
    file system the emptied folders go too."""
    removed = 0
    for name in list(walk(storage, prefix)):
        storage.delete(name)
        removed += 1
    if isinstance(storage, FileSystemStorage):
        shutil.rmtree(storage.path(prefix), ignore_errors=True)
    return removed


def walk(storage: Storage, prefix: str) -> Iterator[str]:
    """The names of every file under `prefix`."""
    try:
        folders, files = storage.listdir(prefix)
    except FileNotFoundError:
        return
    for file in files:
        yield f"{prefix}/{file}"
    for folder in folders:
        yield from walk(storage, f"{prefix}/{folder}")


@contextmanager
def local_copy(storage: Storage, name: str) -> Iterator[Path]:
    """The stored file `name` as a path on this machine for the duration of the block: the
    file itself on the local file system, a temporary download from an object store."""
    if isinstance(storage, FileSystemStorage):
        yield Path(storage.path(name))
        return
    with tempfile.TemporaryDirectory(prefix="run-") as folder:
        target = Path(folder) / os.path.basename(name)
        with storage.open(name, "rb") as source, target.open("wb") as out:
            shutil.copyfileobj(source, out, BLOCK)
        yield target


def open_for_download(storage: Storage, name: str):
    """The stored file `name`, open for a streamed response (FileResponse reads it in
    blocks). Downloads go through the app rather than a presigned URL of the object store:
    the permission check runs on every request (a presigned URL, once issued, works for
    anyone who has it until it expires), the object store need not be reachable from
    users' browsers (a MinIO inside the cluster), and local and S3 storage behave alike.
    The price, the archive's bytes passing through a web process, is small next to how
    rarely exports are downloaded."""
    try:
        return storage.open(name, "rb")
    except _unreachable(storage) as exc:
        raise _unavailable(exc) from None


def identity(storage: Storage) -> tuple:
    """What tells two storages apart for a health check: a folder, or an endpoint and bucket."""
    if isinstance(storage, FileSystemStorage):
        return ("local", storage.location)
    return ("s3", getattr(storage, "endpoint_url", None), storage.bucket_name)


_ping_clients: dict[tuple, object] = {}


def ping(storage: Storage, *, timeout: float = 3.0) -> None:
    """Raise if the storage does not answer (the readiness check): one cheap request, a
    HEAD on the bucket with a short timeout and no retries (the storage's own client waits
    and retries much longer, as uploads should)."""
    if isinstance(storage, FileSystemStorage):
        os.makedirs(storage.location, exist_ok=True)
        if not os.access(storage.location, os.W_OK):
            raise PermissionError("the storage folder is not writable")
        return
    from botocore.config import Config

    key = (*identity(storage), timeout)
    if key not in _ping_clients:
        config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": 1})
        _ping_clients[key] = storage._create_session().client(
            "s3",
            region_name=storage.region_name,
            endpoint_url=storage.endpoint_url,
            config=config,
            **_credentials(storage),
        )
    _ping_clients[key].head_bucket(Bucket=storage.bucket_name)


def _credentials(storage) -> dict:
    found = {}
    if getattr(storage, "access_key", None):
        found["aws_access_key_id"] = storage.access_key
    if getattr(storage, "secret_key", None):
        found["aws_secret_access_key"] = storage.secret_key
    return found
