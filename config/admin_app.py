"""The admin app without discovery at start-up (a command's start-up).

Django's AdminConfig imports every app's `admin` module (and with them their forms) in
`django.setup()`, so every management command paid for them, `import_jsonl` and the Celery
worker included, which serve no admin page. This config is Django's SimpleAdminConfig: the
URLconf calls `admin.autodiscover()` when it loads (config/urls.py), before any request;
and the admin's system check discovers first, so `manage.py check` still checks every
registered ModelAdmin although a command does not load the URLconf.
"""

from django.contrib.admin import autodiscover
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


def check_discovered_admin(app_configs, **kwargs):
    """Django's check of the admin sites, after the apps' admin modules are imported."""
    autodiscover()  # idempotent: an imported module is not imported (or registered) again
    return check_admin_app(app_configs, **kwargs)


class AdminWithoutStartupDiscovery(SimpleAdminConfig):
    def ready(self):
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(check_discovered_admin, checks.Tags.admin)
