"""The web app starts without the statistics and data stack (issue 16).

A web worker imports the settings, the URLconf and every view it names (config.wsgi
does so before gunicorn forks). None of that may import pandas, numpy, scipy,
statsmodels, scikit-learn, matplotlib, pyarrow, krippendorff or the ML extra: they
cost seconds of start-up and tens of MiB per worker, and only reports, plots and
exports use them (imported inside the functions that compute). Checked in a fresh
interpreter, since this test process has imported them long ago.
"""

import json
import os
import subprocess
import sys

from django.conf import settings

HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "statsmodels",
    "sklearn",
    "matplotlib",
    "pyarrow",
    "krippendorff",
    "sentence_transformers",
    "torch",
    "tiktoken",
    "openai",
)

PROBE = """
import json, sys
import config.wsgi  # settings, the app, the URLconf and every view (config.serving.load_urlconf)
from django.urls import get_resolver
print(json.dumps({
    "heavy": sorted(m for m in %r if m in sys.modules),
    "patterns": len(get_resolver().url_patterns),
    "views": sorted(
        m for m in sys.modules
        if m.split(".")[0] in ("annotate", "analysis", "datasets", "generation") and m.endswith(("views", "api"))
    ),
}))
"""


def test_serving_the_app_imports_no_heavy_library(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "1",  # a served site with DEBUG off needs its own SECRET_KEY
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOCAL_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # The probe did load the web app: the URLconf and the apps' views and APIs.
    assert found["patterns"] > 5
    assert {"annotate.views", "analysis.views", "analysis.api"} <= set(found["views"])
    assert found["heavy"] == [], f"serving the web app imported {found['heavy']}"
