"""Benchmark: the REST import of the peers' harness tasks, in process.

Run:  .venv/bin/python tests/bench/bench_import_rest.py [--tasks 500] [--runs 7]
      DATABASE_URL=postgres://... .venv/bin/python tests/bench/bench_import_rest.py

Not collected by pytest. The file tests/bench/peers/bench_ours.py uploads (per task a
source, split into sentences by the importer, and a summary) goes to
POST /api/studies/<slug>/imports/ through Django's test client, into a study made
beforehand by the admin who imports; each run a new study. DATABASE_URL picks the database (by
default a fresh SQLite file under var/; a PostgreSQL database is flushed first). Prints
the median wall-clock and CPU time of the request over --runs, after one run not counted.
CPU time is the steadier figure on a shared machine; the whole-server figures (gunicorn,
requests over HTTP) are bench_ours.py's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "bench" / "peers")]
    scratch = Path(tempfile.mkdtemp(prefix="bench-import-"))
    if "DATABASE_URL" not in os.environ:
        (ROOT / "var").mkdir(exist_ok=True)
        db = ROOT / "var" / "bench-import.sqlite3"
        for suffix in ("", "-wal", "-shm", ".writelock"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    os.environ["IMPORTS_DIR"] = str(scratch / "imports")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.test import APIClient

    if connection.vendor == "postgresql":
        call_command("migrate", verbosity=0)
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)

    import gen_tasks
    import ours_jsonl

    from annotate.models import Summary
    from annotate.services.studies import create_study

    admin = get_user_model().objects.create(username="bench-import-admin")
    client = APIClient()
    client.force_authenticate(admin)
    tasks = gen_tasks.generate(args.tasks)
    walls, cpus = [], []
    for run in range(args.runs + 1):  # the first is not counted
        slug = f"bench-import-{run}"
        study = create_study(slug=slug, title=slug, rubric_key="litsumm", created_by=admin)
        body = ours_jsonl.jsonl_for(slug, tasks, with_study=False).encode()
        upload = SimpleUploadedFile(f"{slug}.jsonl", body, content_type="application/jsonl")
        wall, cpu = time.perf_counter(), time.process_time()
        response = client.post(f"/api/studies/{slug}/imports/", {"file": upload}, format="multipart")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if response.status_code != 202 or response.json()["status"] != "done":
            raise SystemExit(f"import failed: {response.status_code} {response.content[:300]!r}")
        if Summary.objects.filter(study=study).count() != args.tasks:
            raise SystemExit("the import did not store every summary")
        if run:
            walls.append(wall)
            cpus.append(cpu)
    print(
        f"REST import of {args.tasks} tasks, {connection.vendor}, {args.runs} runs: "
        f"wall median {median(walls):.3f} s (min {min(walls):.3f}), CPU median {median(cpus):.3f} s"
    )


if __name__ == "__main__":
    main()
