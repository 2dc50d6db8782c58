"""`python -m tests.config.health_child PATH`: the platform's own settings from the
environment this process was given (a database, broker or storage that is down), one GET
of PATH through Django's test client, and its status and JSON body printed as one line."""

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402

response = Client().get(sys.argv[1])
print(json.dumps({"status": response.status_code, "body": response.json()}))
