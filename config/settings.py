"""Settings, all read from the environment (see .env.example for every variable)
through the typed helpers of core/env.py.

Defaults work on a fresh machine with nothing running: SQLite under var/, Celery
tasks executed in-process, no API keys.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_float, env_int, env_list, env_str, local_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent


DEBUG = env_bool("DEBUG", False)

# "production" makes every missing deployment setting an error (see docs/security.md).
DJANGO_ENV = env_str("DJANGO_ENV", "development")
if DJANGO_ENV not in ("development", "production"):
    raise ImproperlyConfigured(f"DJANGO_ENV must be development or production, got {DJANGO_ENV!r}")

SECRET_KEY = env_str("SECRET_KEY")
# True when the key is this machine's generated development key (var/secret_key), which
# config/wsgi.py and config/asgi.py refuse to serve with DEBUG off.
SECRET_KEY_IS_LOCAL = not SECRET_KEY
if not SECRET_KEY:
    if DJANGO_ENV == "production" or env_bool("SECURE_COOKIES", False):
        raise ImproperlyConfigured(
            "SECRET_KEY must be set in production (DJANGO_ENV=production or SECURE_COOKIES=1); see docs/security.md."
        )
    # A development machine: a random key generated once and kept in var/, so management
    # commands and the development server work with no variables set, and sessions survive
    # a restart. Never a key written in the code.
    SECRET_KEY = local_secret_key(Path(env_str("LOCAL_SECRET_KEY_FILE", str(BASE_DIR / "var" / "secret_key"))))

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # The admin without discovery at start-up (config/admin_app.py): the URLconf discovers
    # the apps' admin modules, so a command that serves no page does not import them.
    "config.admin_app.AdminWithoutStartupDiscovery",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "annotate",
    "generation",
    "analysis",
    "datasets",
    "literature",
    "recruit",
    "planning",
    "sso",
    # config's own management command (`prepare`, what `make run` runs before gunicorn).
    "config",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # These two outside every middleware that makes a response of its own (the JSON errors
    # of ApiErrorMiddleware, the body limits), so every response carries their headers.
    "config.middleware.ContentSecurityPolicyMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (413) and chunked bodies (411), named.
    "config.middleware.RequestBodyLimitMiddleware",
    # Static files from STATIC_ROOT, with the compressed variants `collectstatic` wrote.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Django's pages and JSON gzipped (with "Heal the BREACH" padding, Django >= 4.2), text
    # only (config/middleware.py); below whitenoise, which answers static files itself.
    "config.middleware.GZipTextMiddleware",
    "core.exceptions.ApiErrorMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The page's language: the switcher's cookie, else the browser's Accept-Language, else
    # LANGUAGE_CODE; a study's own language is applied by its rater pages (docs/languages.md).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # After sessions, auth and messages, so its 503 page has the signed-in user's header.
    "core.exceptions.UnavailablePageMiddleware",
    # A login refused by the throttle answers the lockout page (annotate/throttling.py).
    "annotate.throttling.LoginLockMiddleware",
    # Participants reach only their study; raters meet a study's onboarding before its
    # items (recruit/middleware.py, docs/recruitment.md).
    "recruit.middleware.RecruitGateMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "recruit.context_processors.participant",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers take the lock when their transaction starts and wait for each other
    # (instead of failing with "database is locked" on a lock upgrade), and WAL lets
    # readers go on while one writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 20, "init_command": "PRAGMA journal_mode=WAL;"}
    )
    # Django's backend, with writers queued on a lock that wakes the next one at once
    # instead of SQLite's busy handler, which sleeps up to 100 ms between tries.
    DATABASES["default"]["ENGINE"] = "config.sqlite_backend"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# Every login (the login page, the admin's, POST /api/auth/token/) passes the throttle
# before Django's password check (annotate/throttling.py, docs/security.md).
AUTHENTICATION_BACKENDS = ["annotate.throttling.ThrottledModelBackend", "sso.oidc.ProviderBackend"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"  # study admins and viewers: Studies; raters: their queue
LOGOUT_REDIRECT_URL = "login"

# Single sign-on (sso/, docs/accounts.md): OpenID Connect providers and a SAML 2.0 identity
# provider, each shown as a button on the login page; none configured, no button. Secrets
# come from the environment only. OIDC_PROVIDERS names the providers (keys, e.g. "uni,lab");
# each has OIDC_<KEY>_ISSUER (its endpoints come from the issuer's discovery document),
# OIDC_<KEY>_CLIENT_ID, OIDC_<KEY>_CLIENT_SECRET, and optionally OIDC_<KEY>_LABEL (the
# button) and OIDC_<KEY>_GROUPS_CLAIM (a claim listing the person's groups).
OIDC_PROVIDERS = {
    key: {
        "issuer": env_str(f"OIDC_{key.upper()}_ISSUER").rstrip("/"),
        "client_id": env_str(f"OIDC_{key.upper()}_CLIENT_ID"),
        "client_secret": env_str(f"OIDC_{key.upper()}_CLIENT_SECRET"),
        "label": env_str(f"OIDC_{key.upper()}_LABEL", key),
        "groups_claim": env_str(f"OIDC_{key.upper()}_GROUPS_CLAIM"),
    }
    for key in env_list("OIDC_PROVIDERS", [])
}
for _key, _provider in OIDC_PROVIDERS.items():
    if not (_key.isidentifier() and _provider["issuer"] and _provider["client_id"] and _provider["client_secret"]):
        raise ImproperlyConfigured(
            f"OIDC provider {_key!r} needs OIDC_{_key.upper()}_ISSUER, _CLIENT_ID and _CLIENT_SECRET "
            "(and a key of letters, digits and _)"
        )
# Seconds to wait for a provider's answer (discovery, token, keys, userinfo).
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 10.0, positive=True)
# Sign-in by a provider (OIDC or SAML) for an e-mail address no account has: create an
# account (on) or refuse and say to ask a study admin for an invitation (off).
SSO_CREATE_ACCOUNTS = env_bool("SSO_CREATE_ACCOUNTS", False)
# One SAML 2.0 identity provider (sso/saml.py): its metadata from a URL (fetched once per
# process) or a file; SAML_LABEL names the button. This service provider's own metadata is
# served at /accounts/sso/saml/metadata/, and its entity ID is that URL unless
# SAML_SP_ENTITY_ID says otherwise. Assertions must be signed. SAML_SP_KEY_FILE and
# SAML_SP_CERT_FILE (PEM) sign the requests too, when the provider wants that.
SAML_IDP_METADATA_URL = env_str("SAML_IDP_METADATA_URL")
SAML_IDP_METADATA_FILE = env_str("SAML_IDP_METADATA_FILE")
SAML_LABEL = env_str("SAML_LABEL", "your institution")
SAML_SP_ENTITY_ID = env_str("SAML_SP_ENTITY_ID")
SAML_SP_KEY_FILE = env_str("SAML_SP_KEY_FILE")
SAML_SP_CERT_FILE = env_str("SAML_SP_CERT_FILE")
if bool(SAML_SP_KEY_FILE) != bool(SAML_SP_CERT_FILE):
    raise ImproperlyConfigured("SAML_SP_KEY_FILE and SAML_SP_CERT_FILE go together")
# The attributes that carry the person's e-mail address and (optional) groups.
SAML_EMAIL_ATTRIBUTE = env_str("SAML_EMAIL_ATTRIBUTE", "mail")
SAML_GROUPS_ATTRIBUTE = env_str("SAML_GROUPS_ATTRIBUTE")
# Seconds the provider's clock may differ from ours when an assertion's validity is checked.
SAML_CLOCK_SKEW_SECONDS = env_int("SAML_CLOCK_SKEW_SECONDS", 60, minimum=0)
# Debian's xmlsec1 (make xmlsec1); found on the PATH when unset.
SAML_XMLSEC_BINARY = env_str("SAML_XMLSEC_BINARY")
# Groups the provider names mapped to study roles: "group=study-slug:role" items, comma
# separated (e.g. "lab-raters=pilot:rater,lab-pis=pilot:admin"). Roles are added at each
# sign-in, never taken away (docs/accounts.md).
SSO_GROUP_ROLES = env_list("SSO_GROUP_ROLES", [])

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
# The rater's and participant's pages in these languages (docs/languages.md); the admin
# pages stay English. The catalogues are locale/<code>/LC_MESSAGES/django.po and
# djangojs.po, their compiled .mo files committed beside them (`make messages`).
LANGUAGES = [("en", "English"), ("es", "Español"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles"))
STATICFILES_DIRS = [BASE_DIR / "static"]
# whitenoise serves static files itself (no CDN anywhere), from STATIC_ROOT only: what
# `collectstatic` put there (the release step, and every `make run`), with the gzip and
# Brotli variants and the hashed names of its compressed manifest storage. Development and
# production serve the same files.
WHITENOISE_USE_FINDERS = False

# Behind TLS (docs/security.md). SECURE_COOKIES turns on secure cookies, the redirect of
# plain HTTP to HTTPS and, unless DEBUG is on, HSTS for a year; each can be set apart.
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", SECURE_COOKIES)
# A load balancer's health checks often speak plain HTTP to the web process itself.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if SECURE_COOKIES and not DEBUG else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Only behind a proxy that sets X-Forwarded-Proto itself (and drops the client's).
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The Content-Security-Policy of every response (config.middleware): no inline script or
# style anywhere, nothing from another origin, no framing.
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}

# Reverse proxies in front of the server that append the client's address to
# X-Forwarded-For (0: the server faces clients directly and REMOTE_ADDR is theirs).
# Login throttling counts failures per address from this.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)

# Login throttling (annotate/throttling.py, docs/security.md): LOGIN_FAILURE_LIMIT failures
# of one username from one address, or LOGIN_ADDRESS_FAILURE_LIMIT from one address, within
# LOGIN_COOLOFF_MINUTES lock that pair or address for LOGIN_COOLOFF_MINUTES; from
# LOGIN_USERNAME_FAILURE_LIMIT failures of one username within LOGIN_USERNAME_WINDOW_HOURS,
# each try waits 1 s, doubling, at most LOGIN_USERNAME_MAX_DELAY_SECONDS.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_COOLOFF_MINUTES = env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1)
LOGIN_ADDRESS_FAILURE_LIMIT = env_int("LOGIN_ADDRESS_FAILURE_LIMIT", 20, minimum=1)
LOGIN_USERNAME_FAILURE_LIMIT = env_int("LOGIN_USERNAME_FAILURE_LIMIT", 10, minimum=1)
LOGIN_USERNAME_WINDOW_HOURS = env_int("LOGIN_USERNAME_WINDOW_HOURS", 24, minimum=1)
LOGIN_USERNAME_MAX_DELAY_SECONDS = env_int("LOGIN_USERNAME_MAX_DELAY_SECONDS", 60, minimum=1)
# Recruitment links (docs/recruitment.md): new participant accounts per address per window.
RECRUIT_ARRIVALS_PER_ADDRESS = env_int("RECRUIT_ARRIVALS_PER_ADDRESS", 20, minimum=1)
RECRUIT_ARRIVAL_WINDOW_MINUTES = env_int("RECRUIT_ARRIVAL_WINDOW_MINUTES", 60, minimum=1)
# Prolific's API (recruit/prolific.py): review, approve, reject and pay from the participants page.
PROLIFIC_API_TOKEN = env_str("PROLIFIC_API_TOKEN", "")
PROLIFIC_API_URL = env_str("PROLIFIC_API_URL", "https://api.prolific.com/")

# API tokens (POST /api/auth/token/) stop working this many hours after they were made.
API_TOKEN_TTL_HOURS = env_int("API_TOKEN_TTL_HOURS", 720, minimum=1)
# The OpenAPI schema and the Swagger UI: open to anonymous visitors in development,
# to signed-in users only otherwise, unless API_SCHEMA_PUBLIC says so.
API_SCHEMA_PUBLIC = env_bool("API_SCHEMA_PUBLIC", DEBUG)

# E-mail (password reset). With DEBUG on, mail is printed to the console unless
# EMAIL_BACKEND says otherwise; a deployment sets its SMTP server (docs/security.md).
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if DEBUG else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
# Seconds before a silent mail server counts as down (Django's default waits forever).
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "webmaster@localhost")
SERVER_EMAIL = env_str("SERVER_EMAIL", DEFAULT_FROM_EMAIL)
# SMTP over TLS with a client certificate (rare): the PEM files.
EMAIL_SSL_CERTFILE = env_str("EMAIL_SSL_CERTFILE") or None
EMAIL_SSL_KEYFILE = env_str("EMAIL_SSL_KEYFILE") or None
# The file backend (EMAIL_BACKEND=django.core.mail.backends.filebased.EmailBackend) writes
# each message to a file in this folder.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH") or None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "annotate.authentication.HashedTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "annotate.api.pagination.PageOrCursorPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.exceptions.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSON parser plus the text and nesting checks (core/text_validation.py).
    "DEFAULT_PARSER_CLASSES": [
        "annotate.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Summary rating platform API",
    "DESCRIPTION": "Rate LLM-written summaries of the scientific literature.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Filters answered yes/no (rated, assigned) share one enum in the schema.
    "ENUM_NAME_OVERRIDES": {
        "YesNoEnum": ["yes", "no"],
        "RunStatusEnum": ["pending", "running", "done", "failed"],
        "AnswerPhaseEnum": ["initial", "post_discussion"],
        "AnswerPhaseOrAllEnum": ["initial", "post_discussion", "all"],
        "ItemFlagKindEnum": "annotate.models.ItemFlag.Kind",
        "BatchKindEnum": "annotate.models.Batch.Kind",
    },
}

# Celery: with no broker configured, tasks run in-process (eagerly) so a fresh
# machine needs nothing running. With CELERY_BROKER_URL set (Redis or RabbitMQ),
# separate `celery -A config worker` processes run them.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
if not CELERY_BROKER_URL:
    # Tasks run eagerly, but Celery's eager apply_async still takes a producer from
    # the pool: an in-process transport with a hostname, so that nothing connects to
    # amqp://localhost and kombu does not warn "No hostname was supplied" each time.
    CELERY_BROKER_URL = "memory://localhost"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Timeouts of what a request asks the broker (docs/deployment.md, "Timeouts"): a broker that
# accepts connections and never answers fails the enqueue (503, the run marked failed)
# within a few seconds instead of holding the request's thread. BROKER_CONNECT_TIMEOUT
# bounds a connection (TCP and AMQP's handshake, and kombu's reconnection attempts when a
# channel is first needed); BROKER_TIMEOUT one answer or write. Each transport reads its own
# options and ignores the others' (socket_* Redis, read/write_timeout py-amqp). Workers use
# them too: their Redis polls (BRPOP) wait 1 s, well under BROKER_TIMEOUT.
BROKER_CONNECT_TIMEOUT = env_float("BROKER_CONNECT_TIMEOUT", 3.0, positive=True)
BROKER_TIMEOUT = env_float("BROKER_TIMEOUT", 3.0, positive=True)
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_CONNECT_TIMEOUT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": BROKER_CONNECT_TIMEOUT,
    "socket_timeout": BROKER_TIMEOUT,
    "read_timeout": BROKER_TIMEOUT,
    "write_timeout": BROKER_TIMEOUT,
    "max_retries": 1,
}
# Celery's broker_connection_retry and broker_connection_max_retries govern a worker's own
# reconnection only: they keep Celery's defaults, so a worker outlives a broker restart.
# A publish is tried again once, at once: enough for a pooled connection the broker closed
# (a restart); more tries would multiply BROKER_TIMEOUT in a request that waits.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
# A Redis result backend (CELERY_RESULT_BACKEND) is subscribed to when a task is sent.
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = BROKER_CONNECT_TIMEOUT
CELERY_REDIS_SOCKET_TIMEOUT = BROKER_TIMEOUT
# How long a worker waits for the result of a pool process that died before it reports
# WorkerLostError (Celery's default 10 s): our runs keep no result in Celery, and the
# task_failure handlers mark the run "stopped: the worker died" as soon as it is reported.
CELERY_WORKER_LOST_WAIT = 1.0
# How long a new pool process may take to say it is up before the worker kills it and
# starts another (Celery's default 4 s): on a small, loaded machine a fork that replaces a
# killed pool process took longer, and the worker then killed every new one in a loop.
CELERY_WORKER_PROC_ALIVE_TIMEOUT = 30.0
# The periodic work of `celery -A config beat` (Procfile): every minute, runs that no worker
# took within RUN_CLAIM_TIMEOUT are queued again once, then failed, and runs whose worker's
# heartbeat stopped are failed; every day, uploads and export archives older than
# FILE_RETENTION_DAYS are removed. Without beat: the management commands `sweep_runs` and
# `remove_expired_files`, from cron (docs/deployment.md). Study reports need neither: every
# request for a report looks at its run.
CELERY_BEAT_SCHEDULE = {
    "sweep-dataset-runs": {"task": "datasets.tasks.sweep_dataset_runs_task", "schedule": 60.0},
    "sweep-generation-runs": {"task": "generation.tasks.sweep_generation_runs_task", "schedule": 60.0},
    "remove-expired-files": {"task": "datasets.tasks.remove_expired_files_task", "schedule": 24 * 3600.0},
}

# Demo accounts (`manage.py load_demo`).
DEMO_PASSWORD = env_str("DEMO_PASSWORD")

# JSON Lines uploaded for import (datasets.import_runs): where they are kept (var/imports
# when unset; shared with the Celery workers when they run elsewhere) and the largest
# file accepted, in bytes.
IMPORTS_DIR = env_str("IMPORTS_DIR") or None
# The largest request body that is not a file upload (JSON, a form), in bytes: larger is
# a 413 naming this limit (config.middleware.RequestBodyLimitMiddleware). Django's default.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440, minimum=1024)
# Where dataset exports are written (var/exports when unset; shared with the workers, as IMPORTS_DIR).
EXPORTS_DIR = env_str("EXPORTS_DIR") or None
MAX_IMPORT_BYTES = env_int("MAX_IMPORT_BYTES", 200 * 1024 * 1024, minimum=1)
IMPORT_BATCH_SIZE = env_int("IMPORT_BATCH_SIZE", 500, minimum=1)  # rows a statement, every importer (datasets.pipeline)

# Where uploads and exports are kept (core/storage.py, docs/deployment.md): this machine's
# disk under IMPORTS_DIR and EXPORTS_DIR (STORAGE_BACKEND=local, the default), or one bucket
# of an S3-compatible object store (STORAGE_BACKEND=s3) for machines that share no disk.
STORAGE_BACKEND = env_str("STORAGE_BACKEND", "local").lower()
if STORAGE_BACKEND == "local":
    _run_storages = {
        kind: {
            "BACKEND": "core.storage.LocalRunStorage",
            "OPTIONS": {"setting": f"{kind.upper()}_DIR", "default": kind},
        }
        for kind in ("imports", "exports")
    }
elif STORAGE_BACKEND == "s3":
    if not env_str("S3_BUCKET"):
        raise ImproperlyConfigured("STORAGE_BACKEND=s3 needs S3_BUCKET (and S3_REGION, S3_ENDPOINT_URL if not AWS)")
    # Credentials are not settings: boto3 reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
    # (or the machine's role) from the environment itself.
    from botocore.config import Config

    # Timeouts of every call to the store (docs/deployment.md, "Timeouts"): botocore's own
    # (60 s to connect, 60 s for each answer, up to 5 tries) would hold a request's thread
    # for minutes on a store that accepts connections and never answers. This client config
    # replaces django-storages' own, so the addressing style goes in it too.
    _s3_client_config = Config(
        connect_timeout=env_float("S3_CONNECT_TIMEOUT", 3.0, positive=True),
        read_timeout=env_float("S3_READ_TIMEOUT", 10.0, positive=True),
        retries={"mode": "standard", "total_max_attempts": env_int("S3_MAX_ATTEMPTS", 2, minimum=1)},
        s3={"addressing_style": env_str("S3_ADDRESSING_STYLE") or None},
    )
    _run_storages = {
        kind: {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": env_str("S3_BUCKET"),
                "region_name": env_str("S3_REGION") or None,
                "endpoint_url": env_str("S3_ENDPOINT_URL") or None,
                "location": f"{env_str('S3_PREFIX').strip('/') + '/' if env_str('S3_PREFIX') else ''}{kind}",
                "client_config": _s3_client_config,
                "default_acl": None,  # private objects; the bucket's policy decides
                "querystring_auth": True,
                "file_overwrite": False,
            },
        }
        for kind in ("imports", "exports")
    }
else:
    raise ImproperlyConfigured(f"STORAGE_BACKEND must be local or s3, got {STORAGE_BACKEND!r}")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    **_run_storages,
}

# Libraries' routine chatter (an HTTP line per LLM call, axes' banner, ...) stays off the
# console unless it is a warning; a command's -v 2 shows it (core/logs.py).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "library_chatter": {"()": "core.logs.LibraryChatter"},
        "refusals_without_traceback": {"()": "core.logs.RefusalsWithoutTraceback"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["library_chatter", "refusals_without_traceback"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # Django's own console handler (DEBUG only) would write each of its lines a second
    # time beside the root's: its lines reach the console through the root alone.
    "loggers": {
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        # Their debug lines quote tokens and assertions: never below WARNING (sso/).
        "saml2": {"level": "WARNING"},
        "mozilla_django_oidc": {"level": "WARNING"},
        "xmlschema": {"level": "WARNING"},  # pysaml2's schemas: one line per schema loaded
    },
}
