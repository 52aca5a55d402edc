"""What the blueprints share for answering htmx and plain requests from the same URLs (as in
contact-app): is this a fragment request, the page or only its fragment, and a refusal shown
in place of the fragment htmx was waiting for."""

from __future__ import annotations

from typing import Any

from flask import Response, make_response, render_template, request

from webapp.errors import TITLES, UserError, error_response


def is_fragment_request() -> bool:
    """htmx asked for the fragment (a history restore wants the whole page)."""
    return bool(request.headers.get("HX-Request")) and not request.headers.get(
        "HX-History-Restore-Request"
    )


def page_or_fragment(page_template: str, fragment_template: str, **context: Any) -> Response:
    template = fragment_template if is_fragment_request() else page_template
    response = make_response(render_template(template, **context))
    response.vary.add("HX-Request")  # the same URL answers with two bodies
    return response


def refuse_in_place(exc: UserError):
    """htmx gets the message as a fragment for its target; everyone else the app's error page.

    Blueprints register it: `bp.register_error_handler(UserError, refuse_in_place)`."""
    if is_fragment_request():
        title = TITLES.get(exc.status, "Error")
        return render_template(
            "tokenizers/_error.html", title=title, message=exc.message
        ), exc.status
    return error_response(exc.status, exc.message)
