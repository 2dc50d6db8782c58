import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

from config.serving import load_urlconf, refuse_local_key_without_debug  # noqa: E402 - needs settings

refuse_local_key_without_debug()
load_urlconf()
