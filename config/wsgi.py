import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.celery import load_task_machinery  # noqa: E402 - needs settings
from config.serving import load_urlconf, refuse_local_key_without_debug  # noqa: E402

refuse_local_key_without_debug()
load_urlconf()
load_task_machinery()
