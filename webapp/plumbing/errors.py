"""Error pages: every refusal is a page (or JSON under /api/) that says what went wrong."""

from __future__ import annotations

from typing import Any

from flask import Flask, current_app, jsonify, render_template, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException, InternalServerError

from bpe.patterns import PatternError
from webapp.refusals import UserError, human_bytes
from webapp.storage import faults

TITLES = {
    400: "Bad request",
    404: "Not found",
    405: "Method not allowed",
    413: "Too large",
    422: "Cannot use this input",
    414: "Address too long",
    429: "Too many jobs",
    500: "Something broke on our side",
    503: "Try again later",
    507: "Storage full",
}


def wants_json() -> bool:
    return request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json"


def error_response(
    status: int, message: str, *, title: str | None = None, retry_after: int | None = None
) -> tuple[Any, int]:
    """The refusal as a page, or as JSON under /api/ (`retry_after` added when given)."""
    if wants_json():
        extra = {} if retry_after is None else {"retry_after": retry_after}
        return jsonify(error=message, status=status, **extra), status
    html = render_template(
        "errors/error.html",
        status=status,
        title=title or TITLES.get(status, "Error"),
        message=message,
    )
    return html, status


def _message_for(exc: HTTPException) -> str:
    if exc.code == 413:
        limit = current_app.config["MAX_UPLOAD_BYTES"]
        paste = current_app.config["MAX_PASTE_BYTES"]
        return (
            f"The upload is larger than the limit of {human_bytes(limit)} for a file"
            f" ({human_bytes(paste)} for pasted text). Upload a smaller corpus."
        )
    if exc.code == 404:
        return "There is nothing at this address. Links to deleted items stop working too."
    return exc.description or TITLES.get(exc.code or 500, "Error")


def init_app(app: Flask) -> None:
    @app.errorhandler(UserError)
    def _user_error(exc: UserError) -> ResponseReturnValue:
        return error_response(exc.status, exc.message)

    @app.errorhandler(PatternError)
    def _pattern_error(exc: PatternError) -> ResponseReturnValue:
        # A tokeniser's own split pattern refused or out of time on this text (bpe.patterns):
        # answered as the UserError it is, so a blueprint's own handler (a playground's
        # fragment in place) answers it where there is one.
        refusal = UserError(f"This text cannot be split: {exc}.", status=422)
        return app.handle_user_exception(refusal)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> ResponseReturnValue:
        if exc.code is None or exc.code < 400:
            return exc
        return error_response(exc.code, _message_for(exc))

    @app.errorhandler(InternalServerError)
    def _server_error(exc: InternalServerError) -> ResponseReturnValue:
        return error_response(500, "An unexpected error happened; it has been logged.")

    def _storage_error(exc: Exception) -> ResponseReturnValue:
        """A full disk is 507 and an unwritable database 503; anything else is still a 500."""
        fault = faults.classify(exc)
        if fault is None:
            raise exc  # Flask's unhandled path: logged, then the 500 page above
        app.logger.warning("storage fault on %s %s: %s", request.method, request.path, exc)
        return error_response(fault.status, fault.message)

    for kind in faults.FAULT_TYPES:
        app.register_error_handler(kind, _storage_error)
