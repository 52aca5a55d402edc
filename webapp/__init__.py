"""BPE Workbench, the web app: `create_app()` builds it (Flask's application factory).

Layout (flaskr's): config, the database module, the job runner and one blueprint per area,
each wired in with its `init_app(app)` or `register_blueprint`. Templates and static files
live in the top-level `templates/` and `static/` folders.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flask import Flask

from webapp import config, jobs, logs
from webapp.content import fetch_models, imports, parallel_text, sample
from webapp.plumbing import errors, inputs, metrics, owners, ratelimits, security
from webapp.rendering import model_counts, template_filters
from webapp.storage import db, model_choices, uploads
from webapp.storage.warming import WARMER

PROJECT_DIR = Path(__file__).resolve().parent.parent


def create_app(
    test_config: dict[str, Any] | None = None, *, run_jobs: bool = False, serves_pages: bool = True
) -> Flask:
    """The app. `run_jobs=True` (only `webapp.wsgi`, the README's server) makes this process
    run the jobs; `flask` commands, tests and extra processes never do unless they say so.
    `serves_pages=False` (only the Celery worker, which signs no session or form) lets the
    celery backend start without a shared SECRET_KEY."""
    app = Flask(
        __name__,
        instance_relative_config=True,
        template_folder=str(PROJECT_DIR / "templates"),
        static_folder=str(PROJECT_DIR / "static"),
    )
    app.config.from_mapping(config.defaults(app.instance_path))
    app.config.update(config.from_env(os.environ))
    if test_config is not None:
        app.config.update(config.renamed(test_config))
    config.check(app.config)
    if serves_pages and (problem := config.shared_secret_problem(app.config)):
        raise ValueError(problem)
    os.makedirs(app.instance_path, exist_ok=True)
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = security.load_or_make_secret_key(app.instance_path)
    # Flask refuses bodies past this before any view runs; uploads check the file size exactly.
    largest = max(app.config["MAX_UPLOAD_BYTES"], app.config["MAX_IMPORT_BYTES"])
    app.config["MAX_CONTENT_LENGTH"] = largest + 1024 * 1024
    app.config["MAX_FORM_MEMORY_SIZE"] = app.config["MAX_PASTE_BYTES"]

    db.init_app(app)
    logs.init_app(app)
    metrics.init_app(app)
    errors.init_app(app)
    inputs.init_app(app)  # before the blueprints: it replaces the `int` URL converter
    security.init_app(app)
    ratelimits.init_app(app)
    owners.init_app(app)
    template_filters.init_app(app)
    imports.init_app(app)
    fetch_models.init_app(app)
    parallel_text.init_app(app)
    sample.init_app(app)

    from webapp.blueprints import (
        api,
        chat,
        compare,
        corpora,
        home,
        manage,
        ops,
        owner,
        text_evaluation,
        tokenizers,
        vocab_diff,
    )
    from webapp.blueprints import evaluations as evaluation_views
    from webapp.blueprints import imports as import_views
    from webapp.blueprints import jobs as job_views
    from webapp.blueprints import languages as language_views
    from webapp.blueprints import sample as sample_views

    for view_module in (
        home,
        corpora,
        job_views,
        tokenizers,
        compare,
        vocab_diff,
        chat,
        api,
        import_views,
        evaluation_views,
        language_views,
        text_evaluation,
        manage,
        owner,
        sample_views,
        ops,
    ):
        app.register_blueprint(view_module.bp)
    ratelimits.limit_routes(app)

    # A process without the schema (AUTO_MIGRATE off, not upgraded yet) cannot run jobs yet.
    schema_ready = db.current_revision(app.extensions["bpe_db"]) is not None
    if run_jobs:
        # The serving process: uploads cut off by a killed server leave temp files; those of
        # uploads still running (in any process) are locked and stay.
        removed = uploads.remove_leftovers(app.config["UPLOAD_TMP_DIR"])
        if removed:
            app.logger.info("removed %d upload temp file(s) left by a stopped server", removed)
    jobs.init_app(app, run_jobs=run_jobs and schema_ready)
    if run_jobs and schema_ready:
        warm_site_models(app)
    return app


def warm_site_models(app: Flask) -> None:
    """Hand the models the home page counts (the site's: references, imports, the sample pair)
    to the background loader, the one it opens on first: a visitor right after a restart
    then finds them loaded, or at least the one being shown (webapp/storage/warming.py)."""
    database = app.extensions["bpe_db"]
    with app.app_context(), database.read_scope() as session:
        sample_ids = [t.id for t in sample.find_sample(session).tokenizers.values()]
        rows = model_choices.ready_models(session, owner_id=None, site_ids=sample_ids)
        rows = rows[: model_counts.TABLE_LIMIT]
        first = model_counts.pick_model(rows, None)
        keys = [(row.id, row.slug) for row in rows if row is not first]
        if first is not None:
            keys.insert(0, (first.id, first.slug))
    WARMER.warm(database, keys)


def check_database() -> None:
    """The start-up check of the database alone (a server's master process runs it before any
    worker builds the app): SystemExit with one line naming a corrupt SQLite file, or saying
    that the celery backend needs a shared SECRET_KEY. Then the
    schema upgrade (unless BPE_AUTO_MIGRATE is off), so that several workers starting at once
    find the schema at its head instead of all running the same migrations together."""
    settings = {**config.defaults(str(PROJECT_DIR / "instance")), **config.from_env(os.environ)}
    if problem := config.shared_secret_problem(settings):
        raise SystemExit(f"bpe-workbench: {problem}")
    db.check_sqlite_file(settings["DATABASE_URL"])
    if not settings["AUTO_MIGRATE"]:
        return
    database = db.Database(settings["DATABASE_URL"], busy_timeout=settings["SQLITE_BUSY_TIMEOUT"])
    try:
        db.upgrade(database)
    finally:
        database.dispose()  # the workers are forked from this process: no connection crosses


def stop_runners(app: Flask) -> None:
    """Stop what this app runs in the background: the job runner of every kind of job (a
    process that made several apps on one database, such as the tests, must stop each one's, or
    an old runner claims the next app's work)."""
    app.extensions["bpe_jobs"].stop()
