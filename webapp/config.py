"""Configuration: embedded defaults, overridden by environment variables, then by test_config.

Every setting the app reads is listed in ENV_VARS with its meaning; docs/configuration.md's
table is written from it and a test checks that they agree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from limits import parse_many

MB = 1000 * 1000  # decimal, as every size the pages show (webapp.refusals.human_bytes)

# env var -> (config key, parser, what it means)
ENV_VARS: dict[str, tuple[str, Any, str]] = {
    "DATABASE_URL": (
        "DATABASE_URL",
        str,
        "SQLAlchemy URL; default a SQLite file under instance/. `postgresql://...` uses psycopg 3.",
    ),
    "SECRET_KEY": (
        "SECRET_KEY",
        str,
        "Flask secret key; default a random one kept in instance/secret_key, so sessions and"
        " CSRF tokens survive a restart. Required with `BPE_JOB_BACKEND=celery`: every web"
        " process of the site must sign with the same one, or a form loaded from one is refused"
        " (403) when posted to another.",
    ),
    "BPE_PUBLIC_URL": (
        "PUBLIC_URL",
        lambda v: _public_url(v),
        "The site's address as visitors see it (`https://bpe.example.org`): absolute links and"
        " the same-origin check use it, its host is trusted, and cookies get Secure on https.",
    ),
    "BPE_TRUSTED_HOSTS": (
        "TRUSTED_HOSTS",
        lambda v: [h.strip() for h in v.split(",") if h.strip()],
        "Comma-separated host names the app answers to, in any case (like Flask's TRUSTED_HOSTS;"
        " any other Host header gets 400). Default: BPE_PUBLIC_URL's host, else localhost,"
        " 127.0.0.1 and ::1.",
    ),
    "BPE_MAX_UPLOAD_MB": (
        "MAX_UPLOAD_BYTES",
        lambda v: int(float(v) * MB),
        "Largest corpus accepted, in MB (default 200); bigger answers 413.",
    ),
    "BPE_MAX_PASTE_MB": (
        "MAX_PASTE_BYTES",
        lambda v: int(float(v) * MB),
        "Largest pasted text (a form field, held in memory), in MB (default 16).",
    ),
    "BPE_UPLOAD_TMP_DIR": (
        "UPLOAD_TMP_DIR",
        str,
        "Folder where uploads wait while they are checked (default instance/uploads-tmp).",
    ),
    "BPE_API_SYNC_IMPORT_MB": (
        "API_SYNC_IMPORT_BYTES",
        lambda v: int(float(v) * MB),
        "Largest file the JSON API imports within the request, in MB (default 2); a larger one"
        " is queued as a job (202) like the form's.",
    ),
    "BPE_MODEL_CACHE_DIR": (
        "MODEL_CACHE_DIR",
        str,
        "Folder where `flask fetch-models` keeps the tarballs it downloaded (default"
        " instance/model-cache).",
    ),
    "BPE_MAX_IMPORT_MB": (
        "MAX_IMPORT_BYTES",
        lambda v: int(float(v) * MB),
        "Largest tokeniser file (tiktoken or tokenizer.json) imported, in MB (default 64).",
    ),
    "BPE_JOBS_RUNNING": ("JOBS_MAX_RUNNING", int, "Training jobs run at once (default 1)."),
    "BPE_JOBS_QUEUED": (
        "JOBS_MAX_QUEUED",
        int,
        "Jobs that may wait in the queue (default 8); one more answers 429.",
    ),
    "BPE_JOBS_PER_OWNER": (
        "JOBS_PER_OWNER",
        int,
        "Jobs one owner may have queued or running at once (default 3); one more answers 429.",
    ),
    "BPE_JOBS_EXECUTION": (
        "JOBS_EXECUTION",
        str,
        (
            "Where jobs run: `thread` (default: in the background, a runner thread driving"
            " child processes, or Celery workers), `inline` or `manual` (tests: in the request,"
            " or only when a test steps the runner). `BPE_JOBS_MODE` is the old name."
        ),
    ),
    "BPE_JOB_KINDS": (
        "JOB_KINDS",
        lambda v: tuple(s.strip() for s in v.split(",") if s.strip()),
        "Comma-separated job kinds to add to the built-in ones (training, evaluation), each"
        " as `package.module:NAME` (a `webapp.jobs.JobKind`); web and workers must agree.",
    ),
    "BPE_JOB_BACKEND": (
        "JOB_BACKEND",
        str,
        (
            "`embedded` (default: jobs run in the serving process) or `celery` (jobs run on"
            " Celery workers; needs `CELERY_BROKER_URL`)."
        ),
    ),
    "BPE_WORKER_CONCURRENCY": (
        "WORKER_CONCURRENCY",
        int,
        (
            "Jobs one Celery worker process runs at once (default 1; `celery worker -c N`"
            " overrides it). Under Celery this, times the workers, is how many jobs run:"
            " `BPE_JOBS_RUNNING` then only adds to how many may be admitted."
        ),
    ),
    "CELERY_BROKER_URL": (
        "CELERY_BROKER_URL",
        str,
        "The Celery broker for `BPE_JOB_BACKEND=celery`, e.g. `redis://127.0.0.1:6379/0`.",
    ),
    "BPE_LOG_FORMAT": (
        "LOG_FORMAT",
        str,
        (
            "`json` (default): the web and worker processes log one JSON line per event, with"
            " timestamp, level, request id and job id; `text`: plain lines."
        ),
    ),
    "BPE_JOB_QUEUE": (
        "JOB_QUEUE",
        str,
        "The broker queue jobs go through (default `bpe-jobs`); web and workers must agree.",
    ),
    "BPE_SHARD_CHARS": (
        "SHARD_CHARS",
        int,
        (
            "Characters per counting task (default 4,194,304; celery backend): a chunked or"
            " words training cut into more than one shard has them counted by every worker."
        ),
    ),
    "BPE_SHARD_HELP_AFTER": (
        "SHARD_HELP_AFTER",
        float,
        (
            "Seconds a training waits with no shard counted before it counts one itself"
            " (default 1; celery backend): with every worker busy, training goes on."
        ),
    ),
    "BPE_JOBS_STALE_AFTER": (
        "JOBS_STALE_AFTER",
        float,
        (
            "Seconds without a heartbeat after which a running job counts as lost (default 30):"
            " the sweep marks it `interrupted`, a redelivered task may take it over."
        ),
    ),
    "BPE_JOBS_RESEND_AFTER": (
        "JOBS_RESEND_AFTER",
        float,
        (
            "Seconds a job may stay queued and unclaimed before its message is sent again"
            " (default 60; celery backend): a broker that lost its messages loses no job. The"
            " wait doubles with each sending; a duplicate message is dropped by the worker."
        ),
    ),
    "BPE_JOBS_REDELIVER_AFTER": (
        "JOBS_REDELIVER_AFTER",
        float,
        (
            "Seconds after which the broker gives a job's message to another worker if the one"
            " that took it has not acknowledged it (Redis's visibility timeout; celery backend)."
            " Default: `BPE_JOB_MAX_SECONDS` plus 5 minutes (or 1 day without a cap), so a job"
            " still running is not delivered again; a redelivered one whose heartbeat is fresh"
            " is left to its worker anyway."
        ),
    ),
    "BPE_JOBS_KILL_AFTER": (
        "JOBS_KILL_AFTER",
        float,
        "Seconds a training may take to stop after a cancel before it is terminated (default 1).",
    ),
    "BPE_JOB_MAX_SECONDS": (
        "JOBS_MAX_SECONDS",
        float,
        (
            "Longest a job of any kind may run, in seconds (default 3600; 0 for no limit): one"
            ' still running then is killed and ends `failed`, "Stopped: ran past the N s'
            ' limit", which frees its worker for the next job.'
        ),
    ),
    "BPE_JOBS_NICE": (
        "JOBS_NICE",
        int,
        (
            "Niceness added to training processes (default 10, 0 for none): pages and the API"
            " keep the CPU while a job trains; a training only slows when requests need it."
        ),
    ),
    "BPE_PLAYGROUND_MAX_BYTES": (
        "PLAYGROUND_MAX_BYTES",
        int,
        "Largest text the playground, comparison and encode API take, in bytes (default 50000).",
    ),
    "BPE_EVALUATE_MAX_BYTES": (
        "EVALUATE_MAX_BYTES",
        int,
        "Largest pasted text a tokeniser page evaluates in the request, in bytes (default"
        " 1000000); more answers 413 (upload it as a corpus and evaluate that instead).",
    ),
    "BPE_RATELIMIT": (
        "RATELIMIT_ENABLED",
        lambda v: _flag(v),
        "Rate limits per client address (default on; `0` turns every limit below off).",
    ),
    "BPE_RATELIMIT_STORAGE_URL": (
        "RATELIMIT_STORAGE_URI",
        str,
        "Where the rate limits count: `memory://` (default; each web process its own counts)"
        " or `redis://host:6379/1`, shared by every process and machine of the site.",
    ),
    "BPE_RATELIMIT_REQUESTS": (
        "RATELIMIT_APPLICATION",
        lambda v: _rate(v),
        "Requests of any kind one client may make, static files aside (default"
        " `600 per minute`): pages, fragments, the encode API.",
    ),
    "BPE_RATELIMIT_OWNERS": (
        "RATELIMIT_OWNERS",
        lambda v: _rate(v),
        "New owners one client may make (default `10 per minute; 100 per day`): a first"
        " upload, job or share without an owner token, or POST /api/owners.",
    ),
    "BPE_RATELIMIT_UPLOADS": (
        "RATELIMIT_UPLOADS",
        lambda v: _rate(v),
        "Corpus uploads one client may make, page and API (default `10 per minute; 100 per hour`).",
    ),
    "BPE_RATELIMIT_JOBS": (
        "RATELIMIT_JOBS",
        lambda v: _rate(v),
        "Training jobs one client may start: train, re-run, a naive/chunked pair, the sample"
        " (default `10 per minute; 60 per hour`).",
    ),
    "BPE_RATELIMIT_IMPORTS": (
        "RATELIMIT_IMPORTS",
        lambda v: _rate(v),
        "Tokeniser imports one client may make (default `10 per minute; 60 per hour`).",
    ),
    "BPE_RATELIMIT_EVALUATIONS": (
        "RATELIMIT_EVALUATIONS",
        lambda v: _rate(v),
        "Evaluations one client may ask for, of a corpus or of pasted text (default"
        " `20 per minute; 200 per hour`).",
    ),
    "BPE_RATELIMIT_WRITES": (
        "RATELIMIT_WRITES",
        lambda v: _rate(v),
        "Other changes one client may make: renames, deletes, shares, cancels, claims, the"
        " JSON API's PATCH and DELETE (default `60 per minute`).",
    ),
    "FORWARDED_ALLOW_IPS": (
        "FORWARDED_ALLOW_IPS",
        lambda v: [p.strip() for p in v.split(",") if p.strip()],
        "Proxies trusted for X-Forwarded-Proto and -For (gunicorn's own variable, which the app"
        " reads too): comma-separated addresses or networks, `*` any; default none. Rate limits"
        " count the address such a proxy saw instead of the proxy's.",
    ),
    "BPE_AUTO_MIGRATE": (
        "AUTO_MIGRATE",
        lambda v: _flag(v),
        "Upgrade the database to the latest migration at start-up (default on).",
    ),
}


# Old names still read: old name -> the setting's name now (env vars, then config keys).
ENV_ALIASES = {"BPE_JOBS_MODE": "BPE_JOBS_EXECUTION"}
KEY_ALIASES = {"JOBS_MODE": "JOBS_EXECUTION"}


def _flag(value: str) -> bool:
    return value.strip().lower() not in ("0", "false", "no", "off", "")


def _rate(value: str) -> str:
    """A rate limit as Flask-Limiter reads it (`10 per minute; 100 per hour`), checked."""
    parse_many(value)  # ValueError when it is not one
    return value.strip()


RATE_KEYS = (
    "RATELIMIT_APPLICATION",
    "RATELIMIT_OWNERS",
    "RATELIMIT_UPLOADS",
    "RATELIMIT_JOBS",
    "RATELIMIT_IMPORTS",
    "RATELIMIT_EVALUATIONS",
    "RATELIMIT_WRITES",
)


def _public_url(value: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise ValueError(value)
    return value.strip().rstrip("/")


def defaults(instance_path: str) -> dict[str, Any]:
    return {
        "SECRET_KEY": None,  # create_app loads or makes instance/secret_key
        "PUBLIC_URL": None,
        "TRUSTED_HOSTS": None,  # security.init_app: PUBLIC_URL's host, else loopback names
        "JOBS_PER_OWNER": 3,
        "DATABASE_URL": "sqlite:///" + os.path.join(instance_path, "bpe-workbench.sqlite3"),
        "MAX_UPLOAD_BYTES": 200 * MB,
        "MAX_PASTE_BYTES": 16 * MB,
        "MAX_IMPORT_BYTES": 64 * MB,
        "API_SYNC_IMPORT_BYTES": 2 * MB,
        "UPLOAD_TMP_DIR": os.path.join(instance_path, "uploads-tmp"),
        "MODEL_CACHE_DIR": os.path.join(instance_path, "model-cache"),
        "JOBS_MAX_RUNNING": 1,
        "JOBS_MAX_QUEUED": 8,
        "JOBS_EXECUTION": "thread",
        "JOB_KINDS": (),
        # Seconds between progress writes from a running job; a page sees changes within this.
        "JOBS_PROGRESS_INTERVAL": 0.25,
        # A child that ignores the stop flag this long after a cancel is terminated.
        "JOBS_KILL_AFTER": 1.0,
        "JOBS_NICE": 10,
        # A job's child killed after this long, whatever it does (a pattern that backtracks for
        # hours would otherwise hold a worker for as long as its owner likes).
        "JOBS_MAX_SECONDS": 3600.0,
        "JOB_BACKEND": "embedded",
        "CELERY_BROKER_URL": "",
        "WORKER_CONCURRENCY": 1,
        "JOB_QUEUE": "bpe-jobs",
        "JOBS_STALE_AFTER": 30.0,
        "SHARD_CHARS": 1 << 22,  # bpe.shards.SHARD_CHARS
        "SHARD_HELP_AFTER": 1.0,
        # Seconds between sweeps for jobs whose heartbeat stopped (celery backend).
        "JOBS_SWEEP_INTERVAL": 5.0,
        "JOBS_RESEND_AFTER": 60.0,
        "JOBS_REDELIVER_AFTER": 0.0,  # 0: from JOBS_MAX_SECONDS (celery_backend.redeliver_after)
        "LOG_FORMAT": "json",
        "AUTO_MIGRATE": True,
        "PLAYGROUND_MAX_BYTES": 50_000,
        # Seconds the home page's counts table may spend loading models a process has not
        # loaded yet; the rest load in the background and the table shows them when they are.
        "HOME_LOAD_SECONDS": 0.25,
        # Pasted text is evaluated inside the request, so its size bounds the request's time.
        "EVALUATE_MAX_BYTES": 1_000_000,
        "SQLITE_BUSY_TIMEOUT": 30.0,
        # Flask-Limiter's own keys where it has one (webapp/plumbing/ratelimits.py).
        "RATELIMIT_ENABLED": True,
        "RATELIMIT_STORAGE_URI": "memory://",
        "RATELIMIT_KEY_PREFIX": "bpe",  # a Redis shared with the broker keeps them apart
        "RATELIMIT_APPLICATION": "600 per minute",
        "RATELIMIT_OWNERS": "10 per minute; 100 per day",
        "RATELIMIT_UPLOADS": "10 per minute; 100 per hour",
        "RATELIMIT_JOBS": "10 per minute; 60 per hour",
        "RATELIMIT_IMPORTS": "10 per minute; 60 per hour",
        "RATELIMIT_EVALUATIONS": "20 per minute; 200 per hour",
        "RATELIMIT_WRITES": "60 per minute",
        "FORWARDED_ALLOW_IPS": [],
    }


def from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings given in the environment, parsed; a bad value fails start-up with its name."""
    settings: dict[str, Any] = {}
    for old, new in ENV_ALIASES.items():
        if environ.get(old) and not environ.get(new):
            environ = {**environ, new: environ[old]}
    for name, (key, parse, _) in ENV_VARS.items():
        raw = environ.get(name)
        if raw is None or raw == "":
            continue
        try:
            settings[key] = parse(raw)
        except ValueError:
            raise ValueError(f"environment variable {name}={raw!r} is not valid") from None
    return settings


def renamed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings given under an old key (`JOBS_MODE`) under their name now, unless both are."""
    given = dict(settings)
    for old, new in KEY_ALIASES.items():
        if old in given:
            value = given.pop(old)
            given.setdefault(new, value)
    return given


SHARED_SECRET_MISSING = (
    "BPE_JOB_BACKEND=celery serves the site from several processes or machines, which must"
    " sign sessions and forms with one secret: set SECRET_KEY to the same value for every web"
    " process, e.g. the output of `python3 -c 'import secrets; print(secrets.token_hex(32))'`"
    ' (docs/operations.md, "One secret key").'
)


def shared_secret_problem(config: Mapping[str, Any]) -> str | None:
    """Why these settings cannot serve pages on several machines, or None: under Celery each
    process would otherwise make its own key (instance/secret_key is per machine), and a form
    loaded from one would be refused (CSRF, 403) when posted to another."""
    if config["JOB_BACKEND"] == "celery" and not config.get("SECRET_KEY"):
        return SHARED_SECRET_MISSING
    return None


def check(config: Mapping[str, Any]) -> None:
    if config["JOBS_EXECUTION"] not in ("thread", "inline", "manual"):
        raise ValueError(
            f"BPE_JOBS_EXECUTION must be thread, inline or manual, not {config['JOBS_EXECUTION']!r}"
        )
    if config["JOB_BACKEND"] not in ("embedded", "celery"):
        raise ValueError(
            f"BPE_JOB_BACKEND must be embedded or celery, not {config['JOB_BACKEND']!r}"
        )
    if config["JOB_BACKEND"] == "celery" and not config["CELERY_BROKER_URL"]:
        raise ValueError(
            "BPE_JOB_BACKEND=celery needs CELERY_BROKER_URL (e.g. redis://127.0.0.1:6379/0)"
        )
    for key in ("JOBS_MAX_RUNNING", "MAX_UPLOAD_BYTES", "WORKER_CONCURRENCY", "SHARD_CHARS"):
        if config[key] < 1:
            raise ValueError(f"{key} must be at least 1")
    if config["JOBS_PER_OWNER"] < 1:
        raise ValueError("JOBS_PER_OWNER must be at least 1")
    if not 0 <= config["JOBS_NICE"] <= 19:
        raise ValueError("JOBS_NICE must be between 0 and 19")
    for key in RATE_KEYS:
        try:
            _rate(config[key])
        except ValueError:
            raise ValueError(
                f"{key} must be a rate limit such as '10 per minute; 100 per hour',"
                f" not {config[key]!r}"
            ) from None
    if config["JOBS_MAX_SECONDS"] < 0:
        raise ValueError("JOBS_MAX_SECONDS must be 0 (no limit) or more")
    if config["JOBS_MAX_QUEUED"] < 0:
        raise ValueError("JOBS_MAX_QUEUED must be 0 or more")
