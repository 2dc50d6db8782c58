"""The local storage of uploads and exports (core.storage, STORAGE_BACKEND=local): under
IMPORTS_DIR and EXPORTS_DIR, set from the environment or changed at run time; an upload over
its limit is refused with nothing kept; a run's folder is removed whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile

from core import storage
from tests.config.test_server import BASE, environment


class TooLarge(Exception):
    pass


def refuse(limit):
    raise TooLarge(limit)


def test_the_local_storages_follow_their_settings(settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "a"
    settings.IMPORTS_DIR = tmp_path / "b"
    assert storage.exports_storage().location == str(tmp_path / "a")
    assert storage.imports_storage().location == str(tmp_path / "b")
    settings.EXPORTS_DIR = tmp_path / "c"
    assert storage.exports_storage().location == str(tmp_path / "c")


@pytest.mark.parametrize("kind", ["in memory", "on disk", "content"])
def test_an_upload_is_stored_whole_or_not_at_all(settings, tmp_path, kind):
    """An upload Django held in memory is written, one it spooled to disk is moved, any other
    File is written; one over the limit, or an empty one, leaves nothing behind."""
    settings.IMPORTS_DIR = tmp_path / "imports"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    files = storage.imports_storage()
    made = []

    def upload(data: bytes):
        if kind == "in memory":
            made.append(SimpleUploadedFile("a.jsonl", data, content_type="application/jsonl"))
        elif kind == "on disk":
            made.append(TemporaryUploadedFile("a.jsonl", "application/jsonl", len(data), None))
            made[-1].write(data)
            made[-1].flush()
        else:
            made.append(ContentFile(data))
        return made[-1]

    received = upload(b"ab\ncd")
    assert storage.save_upload(files, "s/1/upload.jsonl", received, limit=5, too_large=refuse) == 5
    assert (tmp_path / "imports" / "s" / "1" / "upload.jsonl").read_bytes() == b"ab\ncd"
    if kind == "on disk":  # moved, not copied
        assert not os.path.exists(received.temporary_file_path())
    with pytest.raises(TooLarge):
        storage.save_upload(files, "s/2/upload.jsonl", upload(b"ab\ncde"), limit=5, too_large=refuse)
    assert not (tmp_path / "imports" / "s" / "2").exists()
    assert storage.save_upload(files, "s/3/upload.jsonl", upload(b""), limit=5, too_large=refuse) == 0
    assert not (tmp_path / "imports" / "s" / "3").exists()
    with pytest.raises(FileExistsError):  # ids are UUIDs: a name taken twice is a bug, not a rename
        storage.save_upload(files, "s/1/upload.jsonl", upload(b"x"), limit=5, too_large=refuse)
    assert (tmp_path / "imports" / "s" / "1" / "upload.jsonl").read_bytes() == b"ab\ncd"
    assert sorted(p.name for p in (tmp_path / "imports" / "s" / "1").iterdir()) == ["upload.jsonl"]
    for received in made:  # as Django closes a request's files (a moved one is no error)
        received.close()


def test_a_runs_folder_is_removed_whole(settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "exports"
    files = storage.exports_storage()
    source = tmp_path / "dataset"
    (source / "jsonl").mkdir(parents=True)
    (source / "README.md").write_text("r")
    (source / "jsonl" / "sources.jsonl").write_text("{}\n")
    assert storage.save_folder(files, "s/1/dataset", source) == 2
    storage.save_file(files, "s/1/dataset.zip", source / "README.md")
    storage.save_file(files, "s/1/dataset.zip", source / "jsonl" / "sources.jsonl")  # replaced, not renamed
    assert (tmp_path / "exports" / "s" / "1" / "dataset.zip").read_text() == "{}\n"
    assert sorted(storage.walk(files, "s/1")) == [
        "s/1/dataset.zip",
        "s/1/dataset/README.md",
        "s/1/dataset/jsonl/sources.jsonl",
    ]
    assert storage.delete_tree(files, "s/1") == 3
    assert not (tmp_path / "exports" / "s" / "1").exists()


def test_exports_dir_and_imports_dir_come_from_the_environment(tmp_path):
    script = (
        "import json, django; django.setup(); from core import storage;"
        "print(json.dumps([storage.exports_storage().location, storage.imports_storage().location]))"
    )
    env = {
        **environment(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "EXPORTS_DIR": str(tmp_path / "ex"),
        "IMPORTS_DIR": str(tmp_path / "im"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [str(tmp_path / "ex"), str(tmp_path / "im")]
