"""The serving entry point (`make run`: gunicorn, `webapp.wsgi:app`): the app, and in this
process the embedded job runner. Import it only in the one process that should run jobs."""

from __future__ import annotations

from webapp import create_app, logs

app = create_app(run_jobs=True)
logs.configure(app.config["LOG_FORMAT"])
