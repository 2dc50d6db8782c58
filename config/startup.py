"""What gunicorn's master does to the database before it serves (config/gunicorn.conf.py):
`run_in_child` runs the preparation (migrate, the demo loaders, the first admin) in a child
process, and `next_step` is what the terminal says when the site starts: the next step for
the database it serves, so an empty install is not told to log in to demo accounts."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any


def run_in_child(work: Callable[[], Any]) -> Any:
    """Run `work` in a forked child of this process, wait for it and return what it
    returned (a JSON value, sent back through a pipe); SystemExit with the child's status if
    it failed (its traceback is on stderr).

    gunicorn's master prepares the database before its workers fork from it (issue 30):
    `migrate` imports every app's migrations and renders their models, and the demo loaders
    import numpy, bm25s and the question demo's index. Done in the master, all of that stayed
    in its memory and in every worker's, which fork from it: on a first `make run` the master
    was 234 MiB RSS instead of 88, and on every later start `migrate` alone left about 4 MiB. The
    child has the same loaded app (a fork costs a few milliseconds, not a new interpreter's
    start-up) and takes what it imported and allocated with it when it exits. It opens its
    own database connections and closes them; the master's, if it had any, are closed first
    so that the two never share one."""
    from django.db import connections

    connections.close_all()
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        code = 1
        try:
            result = json.dumps(work())
            with os.fdopen(write_end, "w") as out:
                out.write(result)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                connections.close_all()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        sent = answer.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        # a negative code is the signal that ended the child
        raise SystemExit(code if code > 0 else 128 - code)
    if not sent:  # work ended the child with SystemExit(0): it returned nothing
        return None
    return json.loads(sent)


def next_step(url: str) -> str:
    """One or two lines for the terminal: where the site is and what to do first."""
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError

    try:
        return _next_step(url, get_user_model().objects)
    except DatabaseError:
        return f"Serving on {url}  (the database is not set up: run `make migrate`, or start with WEB_PREPARE=migrate)"


def _next_step(url: str, users) -> str:
    from annotate.models import Study
    from datasets.demo import DEMO_STUDY

    if Study.objects.filter(slug=DEMO_STUDY).exists() and users.filter(username="rater1").exists():
        return f"Serving on {url}  (log in as rater1, rater2 or admin)"
    if not users.filter(is_superuser=True).exists():
        return (
            f"Serving on {url}  (no admin account yet: run `.venv/bin/python manage.py createsuperuser`, "
            "or start again with ADMIN_USERNAME and ADMIN_PASSWORD set)"
        )
    if not Study.objects.exists():
        return f"Serving on {url}  (log in as your admin and create the first study at {url}studies/new/)"
    return f"Serving on {url}"
