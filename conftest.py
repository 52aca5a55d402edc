"""pytest's settings for the whole checkout (the fixtures are in tests/conftest.py).

`--doctest-modules` imports every module it collects under webapp/, for its docstring
examples. The entry points are left out: importing one does the work of its process
(celery_app makes the Celery app, which refuses to start without a broker; wsgi builds the
serving app and its job runner; gunicorn_conf is gunicorn's settings file) and none has an
example to run.
"""

collect_ignore = ["webapp/celery_app.py", "webapp/wsgi.py", "webapp/gunicorn_conf.py"]
