"""Onefold settings: every value comes from an environment variable (listed in docker/.env.example).

Without any variable set, Onefold runs on its embedded defaults: SQLite and a filesystem Celery
broker under ``ONEFOLD_VAR_DIR``. A bad value stops start-up with a message naming the variable.
"""

import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def env_text(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.lower() not in {"true", "false", "1", "0", "yes", "no"}:
        raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}.")
    return value.lower() in {"true", "1", "yes"}


def env_int(name: str, default: int, minimum: int = 1) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {value!r}.") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {number}.")
    return number


DEBUG = env_bool("ONEFOLD_DEBUG", False)
SECRET_KEY = os.environ.get("ONEFOLD_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "ONEFOLD_SECRET_KEY must be set (or ONEFOLD_DEBUG=true for a local demo)."
        )
    SECRET_KEY = "onefold-insecure-development-key"
ALLOWED_HOSTS = [
    host for host in env_text("ONEFOLD_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if host
]
CSRF_FAILURE_VIEW = "frontend.error_pages.csrf_failure"
CSRF_TRUSTED_ORIGINS = [
    origin for origin in env_text("ONEFOLD_CSRF_TRUSTED_ORIGINS", "").split(",") if origin
]

# E-mail (notices to silos): Django's backend and SMTP settings; the console backend prints mails instead.
EMAIL_BACKEND = env_text("ONEFOLD_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_text("ONEFOLD_EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("ONEFOLD_EMAIL_PORT", 25)
EMAIL_HOST_USER = env_text("ONEFOLD_EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("ONEFOLD_EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("ONEFOLD_EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_text("ONEFOLD_EMAIL_FROM", "Onefold <noreply@localhost>")
# The market's address as people reach it, for links in e-mails (pages use the request's own address).
ONEFOLD_PUBLIC_URL = env_text("ONEFOLD_PUBLIC_URL", "http://localhost:8000")

VAR_DIR = Path(env_text("ONEFOLD_VAR_DIR", str(BASE_DIR / "var"))).resolve()
MEDIA_ROOT = Path(env_text("ONEFOLD_MEDIA_ROOT", str(VAR_DIR / "media"))).resolve()
# Nothing serves MEDIA_ROOT (no URL pattern, WhiteNoise serves STATIC_ROOT only): artifacts are downloaded through
# views that check access. MEDIA_URL stays set only because Django's test live server requires one.
MEDIA_URL = "/media/"
STATIC_URL = "/static/"
STATIC_ROOT = Path(env_text("ONEFOLD_STATIC_ROOT", str(VAR_DIR / "static"))).resolve()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served locally, so the API docs work offline
    "market.accounts",
    "market.federations",
    "market.submissions",
    "market.jobs",
    "market.budgets",
    "market.commerce",
    "market.audit",
    "market.exchanges",
    "market.augmentations",
    "market.invitations",
    "market.webhooks",
    "market.notifications",
    "frontend",
    "workers.apps.WorkersConfig",  # loads the Celery app and its tasks once Django is ready (market.outbox publishes)
]

MIDDLEWARE = [
    "market.server_timing.ServerTimingMiddleware",  # first, so that its total covers every other middleware
    "django.middleware.security.SecurityMiddleware",
    "market.client_address.ClientAddressMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "market.cache_headers.PrivateAnswersMiddleware",  # after WhiteNoise: static files stay cacheable
    "frontend.error_pages.AppErrorPagesMiddleware",  # outside sessions and authentication: knows who asks
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "market.accounts.middleware.RefuseUnstorableInputMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "market.transient.DatabaseBusyMiddleware",  # last: the first to see a view's exception
]

# A Server-Timing header with the request's database time and the rest (market/server_timing.py); for measuring.
ONEFOLD_SERVER_TIMING = env_bool("ONEFOLD_SERVER_TIMING", False)

ROOT_URLCONF = "market.urls"
WSGI_APPLICATION = "market.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

if "DATABASE_URL" not in os.environ:  # the embedded default: SQLite in the var folder
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        env_text("DATABASE_URL", f"sqlite:///{VAR_DIR / 'onefold.sqlite3'}"), conn_max_age=0
    )
}
# Persistent connections by default: opening one per request cost about a third of a catalog request
# (benchmarks/catalog.md). Each web thread or worker process then holds one connection; the health check replaces
# a connection the server closed.
_conn_max_age = env_text("ONEFOLD_DB_CONN_MAX_AGE", "60")
if not _conn_max_age.isdigit():
    raise ImproperlyConfigured(
        f"ONEFOLD_DB_CONN_MAX_AGE must be a whole number of seconds, not {_conn_max_age!r}."
    )
DATABASES["default"]["CONN_MAX_AGE"] = int(_conn_max_age)  # 0: a new connection per request
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Or a pool per process (Django's psycopg pool, psycopg[pool]): ONEFOLD_DB_POOL_MAX_SIZE connections at most, shared
# by the process's threads, instead of one persistent connection per thread (docs/scaling.md). 0 (the default): no
# pool. A pool replaces persistent connections, so it sets CONN_MAX_AGE to 0 (Django refuses both).
_pool_max_size = env_int("ONEFOLD_DB_POOL_MAX_SIZE", 0, minimum=0)
if _pool_max_size:
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            "ONEFOLD_DB_POOL_MAX_SIZE needs PostgreSQL (a postgres:// DATABASE_URL); SQLite has no pool."
        )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(env_int("ONEFOLD_DB_POOL_MIN_SIZE", 1, minimum=0), _pool_max_size),
        "max_size": _pool_max_size,
        "timeout": env_int("ONEFOLD_DB_POOL_TIMEOUT_SECONDS", 10),
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default holds a handful of concurrent users: in WAL mode readers go on while one connection
    # writes; a transaction takes the write lock when it begins (a deferred one that later upgrades its read lock
    # is refused at once, "database is locked", whatever the timeout); a writer waits for the lock (20 s by
    # default). What still finds it locked is answered 503 with Retry-After (market/transient.py).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("ONEFOLD_SQLITE_BUSY_TIMEOUT_SECONDS", 20),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"}
]
LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_TZ = True


def artifact_storage(kind: str) -> dict:
    """Where artifacts live (uploads, public data, chunk results, global models, bundles, exports): the filesystem
    under ONEFOLD_MEDIA_ROOT, or (``s3``) a private bucket of an S3-compatible store, read by every web and worker
    machine alike (docs/scaling.md). Credentials come from boto3's usual sources (AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY, or the machine's role)."""
    if kind == "filesystem":
        return {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    if kind != "s3":
        raise ImproperlyConfigured(f"ONEFOLD_STORAGE must be filesystem or s3, not {kind!r}.")
    bucket = env_text("ONEFOLD_S3_BUCKET", "")
    if not bucket:
        raise ImproperlyConfigured("ONEFOLD_STORAGE=s3 needs ONEFOLD_S3_BUCKET, the bucket's name.")
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": env_text("ONEFOLD_S3_ENDPOINT_URL", "")
            or None,  # MinIO, Ceph, a test server
            "region_name": env_text("ONEFOLD_S3_REGION", "") or None,
            "addressing_style": env_text("ONEFOLD_S3_ADDRESSING_STYLE", "")
            or None,  # "path" for MinIO
            "signature_version": "s3v4",
            "default_acl": None,  # the bucket's own policy: private
            "querystring_auth": True,  # presigned, expiring URLs only
            "querystring_expire": ONEFOLD_PRESIGNED_SECONDS,
            "file_overwrite": False,  # a taken name gets a suffix, as on the filesystem: nothing is overwritten
        },
    }


#: How long a presigned download URL works; it never outlives the download link it was made for.
ONEFOLD_PRESIGNED_SECONDS = env_int("ONEFOLD_PRESIGNED_SECONDS", 60)
ONEFOLD_STORAGE = env_text("ONEFOLD_STORAGE", "filesystem")
STORAGES = {
    "default": artifact_storage(ONEFOLD_STORAGE),
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
#: With object storage, a bought file is downloaded straight from the store through a presigned URL (after the
#: entitlement check and the audit); off, or on the filesystem, the web process streams it.
ONEFOLD_PRESIGNED_DOWNLOADS = env_bool("ONEFOLD_PRESIGNED_DOWNLOADS", ONEFOLD_STORAGE == "s3")

# Uploads: the size limit is enforced while the body streams in (market.uploads).
ONEFOLD_MAX_UPLOAD_BYTES = env_int("ONEFOLD_MAX_UPLOAD_BYTES", 64 * 1024**2)
FILE_UPLOAD_HANDLERS = ["market.uploads.SizeLimitedUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024**2
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("ONEFOLD_MAX_MODEL_FILES", 20)

# Limits on uploaded tables and models, checked before anything is unpacked or loaded.
ONEFOLD_TABLE_MAX_ROWS = env_int("ONEFOLD_TABLE_MAX_ROWS", 2_000_000)
ONEFOLD_ARCHIVE_MAX_ENTRIES = env_int("ONEFOLD_ARCHIVE_MAX_ENTRIES", 16)
ONEFOLD_ARCHIVE_MAX_UNPACKED_BYTES = env_int("ONEFOLD_ARCHIVE_MAX_UNPACKED_BYTES", 2 * 1024**3)
# What one uploaded table's values may take in memory, judged from an NPZ's .npy headers or a Parquet file's
# metadata before they are read: by default what the largest CSV upload can take (4 bytes of float64 per byte).
ONEFOLD_TABLE_MAX_MEMORY_BYTES = env_int(
    "ONEFOLD_TABLE_MAX_MEMORY_BYTES", 4 * ONEFOLD_MAX_UPLOAD_BYTES
)
ONEFOLD_MODEL_MAX_TREES = env_int("ONEFOLD_MODEL_MAX_TREES", 2_000)
ONEFOLD_MODEL_MAX_TREE_NODES = env_int("ONEFOLD_MODEL_MAX_TREE_NODES", 100_000)
ONEFOLD_MODEL_MAX_TREE_DEPTH = env_int("ONEFOLD_MODEL_MAX_TREE_DEPTH", 64)
ONEFOLD_MODEL_MAX_PARAMETERS = env_int("ONEFOLD_MODEL_MAX_PARAMETERS", 20_000_000)
ONEFOLD_SANDBOX_MEMORY_MB = env_int("ONEFOLD_SANDBOX_MEMORY_MB", 4096)
ONEFOLD_SANDBOX_CPU_SECONDS = env_int("ONEFOLD_SANDBOX_CPU_SECONDS", 120)
ONEFOLD_SANDBOX_WALL_SECONDS = env_int("ONEFOLD_SANDBOX_WALL_SECONDS", 120)
ONEFOLD_VALIDATION_SAMPLE_ROWS = env_int("ONEFOLD_VALIDATION_SAMPLE_ROWS", 256)
# Tests only: lets a tampered model reach the native library so that the sandbox is exercised.
ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS = env_bool("ONEFOLD_UNSAFE_SKIP_STRUCTURAL_CHECKS", False)

# Market: the fee kept from every sale (whole percent, 0-100), download-link lifetime, prediction API limits.
_market_fee = env_text("ONEFOLD_MARKET_FEE_PERCENT", "10")
if not _market_fee.isdigit() or int(_market_fee) > 100:
    raise ImproperlyConfigured(
        f"ONEFOLD_MARKET_FEE_PERCENT must be a whole number from 0 to 100, not {_market_fee!r}."
    )
ONEFOLD_MARKET_FEE_PERCENT = int(_market_fee)
ONEFOLD_DOWNLOAD_LINK_TTL_SECONDS = env_int("ONEFOLD_DOWNLOAD_LINK_TTL_SECONDS", 300)
ONEFOLD_PREDICT_RATE = env_text("ONEFOLD_PREDICT_RATE", "60/minute")
if not re.fullmatch(r"[1-9][0-9]*/(second|minute|hour|day)", ONEFOLD_PREDICT_RATE):
    raise ImproperlyConfigured(
        f"ONEFOLD_PREDICT_RATE must look like 60/minute, not {ONEFOLD_PREDICT_RATE!r}."
    )
ONEFOLD_PREDICT_MAX_ROWS = env_int("ONEFOLD_PREDICT_MAX_ROWS", 10_000)
# Warm sandbox sessions that serve predictions, per web process: how many at once (over every model; 0 runs each
# call in a fresh sandbox child), and the calls and idle seconds after which one is closed.
ONEFOLD_PREDICT_SESSIONS = env_int("ONEFOLD_PREDICT_SESSIONS", 4, minimum=0)
ONEFOLD_PREDICT_SESSION_CALLS = env_int("ONEFOLD_PREDICT_SESSION_CALLS", 1000)
ONEFOLD_PREDICT_SESSION_IDLE_SECONDS = env_int("ONEFOLD_PREDICT_SESSION_IDLE_SECONDS", 300)

# Federated distillation exchanges: most rounds, longest round, largest |logit| a silo may upload.
ONEFOLD_FD_MAX_ROUNDS = env_int("ONEFOLD_FD_MAX_ROUNDS", 100)
ONEFOLD_FD_MAX_ROUND_SECONDS = env_int("ONEFOLD_FD_MAX_ROUND_SECONDS", 7 * 24 * 3600)
ONEFOLD_FD_MAX_LOGIT = env_int("ONEFOLD_FD_MAX_LOGIT", 10_000)

# Federated augmentation: most seed rows per silo, most features per row, most discriminator epochs.
ONEFOLD_FAUG_MAX_SEEDS = env_int("ONEFOLD_FAUG_MAX_SEEDS", 1000)
ONEFOLD_FAUG_MAX_FEATURES = env_int("ONEFOLD_FAUG_MAX_FEATURES", 4096)
ONEFOLD_FAUG_MAX_EPOCHS = env_int("ONEFOLD_FAUG_MAX_EPOCHS", 1000)
# A training whose estimated work (row-passes, the unit of ONEFOLD_JOB_MAX_WORK: steps × (a step's fixed cost + its
# rows through the networks)) exceeds this is refused at start, before any ε is reserved; 5·10⁹ is about 25 minutes
# of one worker core, inside the task's 30-minute soft limit.
ONEFOLD_FAUG_MAX_WORK = env_int("ONEFOLD_FAUG_MAX_WORK", 5_000_000_000)
# A CTGAN augmentation publishes this many generated rows of each seeded label (its model cannot travel without pickle).
ONEFOLD_FAUG_TABULAR_ROWS_PER_LABEL = env_int("ONEFOLD_FAUG_TABULAR_ROWS_PER_LABEL", 1000)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "market.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # The JSON parser first: DRF also picks it for a wildcard Content-Type (application/*, */*), and it refuses
    # what market.json_input refuses whatever Content-Type brought the body.
    "DEFAULT_PARSER_CLASSES": [
        "market.json_input.CheckedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "market.errors.api_exception_handler",
    # Per token and per user (all of a user's tokens and sessions together), per address without credentials;
    # 429 carries Retry-After.
    "DEFAULT_THROTTLE_CLASSES": [
        "market.accounts.authentication.TokenRateThrottle",
        "market.accounts.authentication.AnonymousRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "token": env_text("ONEFOLD_API_RATE_PER_TOKEN", "600/minute"),
        "user": env_text("ONEFOLD_API_RATE_PER_USER", "600/minute"),
        "anonymous": env_text("ONEFOLD_API_RATE_ANONYMOUS", "120/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Onefold API",
    "DESCRIPTION": "A model market for one-shot federated learning.",
    "VERSION": "0.1.0",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No deep links: Swagger UI puts them inside its operation buttons, a link nested in a button (axe).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False, "persistAuthorization": True},
    "ENUM_NAME_OVERRIDES": {
        "PrivacyLevelEnum": "market.federations.models.PrivacyLevel",
        "JobKindEnum": "market.jobs.parameters.job_kind_choices",
        "WalletEntryKindEnum": "market.commerce.models.WalletEntryKind",
        "ListingStatusEnum": "market.commerce.models.ListingStatus",
        "PlanKindEnum": "market.commerce.plan_models.PlanKind",
        "ListingAccessEnum": "market.commerce.models.ListingAccess",
        "ExchangeStatusEnum": "market.exchanges.models.ExchangeStatus",
        "RoundStatusEnum": "market.exchanges.models.RoundStatus",
        "AugmentationStatusEnum": "market.augmentations.models.AugmentationStatus",
        "InvitationKindEnum": "market.invitations.models.InvitationKind",
        "InvitationStateEnum": ["open", "accepted", "revoked", "expired"],
        "TokenStateEnum": ["active", "expired", "revoked"],
        "WebhookEventTypeEnum": "market.webhooks.models.WebhookEventType",
        "WebhookDeliveryStatusEnum": "market.webhooks.models.DeliveryStatus",
    },
}

# Celery: JSON only, late acknowledgement, explicit time limits; state lives in PostgreSQL rows.
CELERY_BROKER_URL = env_text("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_FOLDER = VAR_DIR / "broker"
if CELERY_BROKER_URL == "filesystem://":
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_FOLDER / "queue"),
        "data_folder_out": str(CELERY_BROKER_FOLDER / "queue"),
        "control_folder": str(CELERY_BROKER_FOLDER / "control"),
        "store_processed": False,
    }
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("ONEFOLD_TASK_SOFT_TIME_LIMIT", 30 * 60)
CELERY_TASK_TIME_LIMIT = env_int("ONEFOLD_TASK_TIME_LIMIT", 35 * 60)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Celery's Django fix-up closes every database connection around every task unless this is set (issue 42: 15 % of a
# webhook delivery was opening a PostgreSQL connection), so ONEFOLD_DB_CONN_MAX_AGE would mean nothing in workers.
# With it, a worker keeps its connection; workers.celery_app closes it around a task only where Django would close a
# request's (past CONN_MAX_AGE, or unusable after an error), and the fix-up recycles it every this many tasks.
CELERY_DB_REUSE_MAX = env_int("ONEFOLD_WORKER_DB_REUSE_MAX", 1000, minimum=0)
# Queues per workload (docs/scaling.md). A worker started without -Q consumes every queue (one machine, the demo,
# the tests); a deployment starts workers per queue, so that long jobs never starve validations.
CELERY_TASK_DEFAULT_QUEUE = "celery"
ONEFOLD_TASK_QUEUES = {
    "validations": ["onefold.submission_validate"],
    "jobs": [
        "onefold.job_start",
        "onefold.job_chunk",
        "onefold.job_finalize",
        "onefold.job_estimate",
        "onefold.exchange_round_aggregate",
    ],
    "augmentations": ["onefold.augmentation_train"],
    "messages": ["onefold.webhook_*", "onefold.notification_*"],  # outbound deliveries and e-mail
    "maintenance": [  # beat's periodic sweeps: short, and late only if a long task holds their worker
        "onefold.outbox_sweep",
        "onefold.job_reap",
        "onefold.submission_reap",
        "onefold.exchange_reap",
        "onefold.augmentation_reap",
        "onefold.webhook_reap",
    ],
}
CELERY_TASK_QUEUES = [Queue(name) for name in [CELERY_TASK_DEFAULT_QUEUE, *ONEFOLD_TASK_QUEUES]]
CELERY_TASK_ROUTES = {
    task: {"queue": queue} for queue, tasks in ONEFOLD_TASK_QUEUES.items() for task in tasks
}

# Aggregation jobs (workers.runner): leases, heartbeats, the reaper and the fan-out.
ONEFOLD_JOB_LEASE_SECONDS = env_int("ONEFOLD_JOB_LEASE_SECONDS", 120)
ONEFOLD_JOB_HEARTBEAT_SECONDS = env_int("ONEFOLD_JOB_HEARTBEAT_SECONDS", 20)
ONEFOLD_JOB_REAPER_SECONDS = env_int("ONEFOLD_JOB_REAPER_SECONDS", 60)
ONEFOLD_JOB_MAX_ATTEMPTS = env_int("ONEFOLD_JOB_MAX_ATTEMPTS", 3)
ONEFOLD_JOB_CHUNK_SIZE = env_int("ONEFOLD_JOB_CHUNK_SIZE", 25)
ONEFOLD_JOB_OUTBOX_GRACE_SECONDS = env_int("ONEFOLD_JOB_OUTBOX_GRACE_SECONDS", 10)
ONEFOLD_JOB_REPUBLISH_SECONDS = env_int("ONEFOLD_JOB_REPUBLISH_SECONDS", 600)
# Pre-flight estimates (market.jobs.preflight, issue 38 item 9): new estimates one operator may ask per hour in one
# federation, and simulated draws (fusions) all of a federation's estimates may take per hour (at least one
# estimate's most, 10).
ONEFOLD_ESTIMATES_PER_HOUR = env_int("ONEFOLD_ESTIMATES_PER_HOUR", 6)
ONEFOLD_ESTIMATE_DRAWS_PER_HOUR = env_int("ONEFOLD_ESTIMATE_DRAWS_PER_HOUR", 30, minimum=10)
# Webhooks (market.webhooks, docs/automation.md): outbound safety, retries, automatic disabling.
ONEFOLD_WEBHOOK_ALLOW_PRIVATE = env_bool("ONEFOLD_WEBHOOK_ALLOW_PRIVATE", False)
ONEFOLD_WEBHOOK_ALLOW_HTTP = env_bool("ONEFOLD_WEBHOOK_ALLOW_HTTP", False)
# Seconds to connect and for each read; the whole attempt (resolution, connection, request, answer) has its own
# deadline, however the receiver trickles its answer (issue 38 item 7).
ONEFOLD_WEBHOOK_TIMEOUT_SECONDS = env_int("ONEFOLD_WEBHOOK_TIMEOUT_SECONDS", 10)
ONEFOLD_WEBHOOK_DELIVERY_SECONDS = env_int("ONEFOLD_WEBHOOK_DELIVERY_SECONDS", 15)
ONEFOLD_WEBHOOK_RESPONSE_BYTES = env_int("ONEFOLD_WEBHOOK_RESPONSE_BYTES", 64 * 1024)
ONEFOLD_WEBHOOK_MAX_ATTEMPTS = env_int("ONEFOLD_WEBHOOK_MAX_ATTEMPTS", 10)
ONEFOLD_WEBHOOK_RETRY_BASE_SECONDS = env_int("ONEFOLD_WEBHOOK_RETRY_BASE_SECONDS", 10)
ONEFOLD_WEBHOOK_DISABLE_AFTER_FAILURES = env_int("ONEFOLD_WEBHOOK_DISABLE_AFTER_FAILURES", 50)
ONEFOLD_WEBHOOK_ROTATION_GRACE_SECONDS = env_int(
    "ONEFOLD_WEBHOOK_ROTATION_GRACE_SECONDS", 24 * 3600
)
# Active webhook endpoints one organisation may have (issue 38 item 8): each multiplies every event's deliveries.
ONEFOLD_WEBHOOK_ENDPOINTS_PER_ORGANISATION = env_int(
    "ONEFOLD_WEBHOOK_ENDPOINTS_PER_ORGANISATION", 10
)
# Jobs whose estimated work (row-passes: member models × public rows + the fit, e.g. trees × depth × rows) exceeds
# this are refused at creation; 10⁹ is several minutes of one worker core.
ONEFOLD_JOB_MAX_WORK = env_int("ONEFOLD_JOB_MAX_WORK", 1_000_000_000)
ONEFOLD_CODE_VERSION = env_text(
    "ONEFOLD_CODE_VERSION", ""
)  # recorded in lineage; empty: `git describe`

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_text("ONEFOLD_LOG_LEVEL", "INFO")},
}

# --- security: tokens, sign-in limits, HTTPS, Content Security Policy (issue 9) ---
for _scope, _rate in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"].items():
    if not re.fullmatch(r"[1-9][0-9]*/(second|minute|hour|day)", _rate):
        raise ImproperlyConfigured(
            f"The {_scope} API rate must look like 600/minute, not {_rate!r}."
        )
ONEFOLD_TOKEN_DEFAULT_DAYS = env_int("ONEFOLD_TOKEN_DEFAULT_DAYS", 90)
ONEFOLD_TOKEN_MAX_DAYS = env_int("ONEFOLD_TOKEN_MAX_DAYS", 365)
# Lifetime of an invitation link (days), and how many invitation links one address may open per hour.
ONEFOLD_INVITATION_DAYS = env_int("ONEFOLD_INVITATION_DAYS", 7)
ONEFOLD_INVITATION_LOOKUPS_PER_HOUR = env_int("ONEFOLD_INVITATION_LOOKUPS_PER_HOUR", 30)
# Failed sign-ins per account from one address, per account from anywhere, per address (market.accounts.services).
ONEFOLD_SIGNIN_MAX_FAILURES = env_int("ONEFOLD_SIGNIN_MAX_FAILURES", 5)
ONEFOLD_SIGNIN_MAX_FAILURES_PER_ACCOUNT = env_int("ONEFOLD_SIGNIN_MAX_FAILURES_PER_ACCOUNT", 50)
ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS = env_int("ONEFOLD_SIGNIN_MAX_FAILURES_PER_ADDRESS", 20)
ONEFOLD_SIGNIN_WINDOW_SECONDS = env_int("ONEFOLD_SIGNIN_WINDOW_SECONDS", 15 * 60)
# Sign-in counters and API throttles live in the cache: one Redis shared by every web process in production.
_CACHE_URL = env_text("ONEFOLD_CACHE_URL", "")
CACHES = {
    "default": {"BACKEND": "market.redis_cache.ReusedClientRedisCache", "LOCATION": _CACHE_URL}
    if _CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
# Seconds a catalog page may stay in the cache (market/commerce/catalog_cache.py; a listing change drops it at once).
# Needs the shared cache: off (0) by default without ONEFOLD_CACHE_URL.
ONEFOLD_CATALOG_CACHE_SECONDS = env_int(
    "ONEFOLD_CATALOG_CACHE_SECONDS", 60 if _CACHE_URL else 0, minimum=0
)

if not DEBUG and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    raise ImproperlyConfigured(
        "ONEFOLD_SECRET_KEY must be a random string of at least 50 characters."
    )
SECURE_SSL_REDIRECT = env_bool("ONEFOLD_SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("ONEFOLD_SECURE_COOKIES", not DEBUG)
SECURE_HSTS_SECONDS = 0 if DEBUG else env_int("ONEFOLD_HSTS_SECONDS", 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("ONEFOLD_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("ONEFOLD_HSTS_PRELOAD", True)
# How many reverse proxies append to X-Forwarded-For in front of the app: the client address is the entry
# that many places from the right (market/client_address.py). 0: REMOTE_ADDR, and X-Forwarded-For is ignored.
ONEFOLD_TRUSTED_PROXIES = env_int("ONEFOLD_TRUSTED_PROXIES", 0, minimum=0)
if env_bool(
    "ONEFOLD_BEHIND_HTTPS_PROXY", False
):  # only behind a proxy that sets (never forwards) this header
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# Pages run no inline script and no inline handler: JavaScript comes from our static files only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
