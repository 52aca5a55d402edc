"""What the blueprints share for answering htmx and plain requests from the same URLs (as in
contact-app): is this a fragment request, the page or only its fragment, and a refusal shown
in place of the fragment htmx was waiting for."""

from __future__ import annotations

from typing import Any

from flask import Response, make_response, render_template, request, url_for
from flask.typing import ResponseReturnValue

from webapp.plumbing.errors import TITLES, error_response
from webapp.refusals import UserError
from webapp.rendering.playground import Display


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


def refuse_in_place(exc: UserError) -> ResponseReturnValue:
    """htmx gets the message as a fragment for its target; everyone else the app's error page.

    Blueprints register it: `bp.register_error_handler(UserError, refuse_in_place)`."""
    if is_fragment_request():
        title = TITLES.get(exc.status, "Error")
        return render_template(
            "tokenizers/_error.html", title=title, message=exc.message
        ), exc.status
    return error_response(exc.status, exc.message)


# ----- lists whose state lives in the URL (vocabulary, merges) ------------------------------
def list_url_args(query: Any, display: Display) -> dict[str, Any]:
    """The shortest query string for a list's state: defaults and empty fields left out."""
    args = query.query()
    if not display.whitespace:
        args["ws"] = "0"  # lists show whitespace unless told not to
    if display.invalid == "replace":
        args["invalid"] = "replace"
    return args


def noisy_query(args: Any) -> bool:
    """A plain (no-JavaScript) form GET sends every field, empty ones and the checkbox's
    hidden fallback too (`&category=&min_len=&ws=1&ws=0`); such URLs are sent on to the
    short form, so what the address bar shows (and gets shared) is only what was chosen."""
    return any(not value for value in args.values()) or len(args.getlist("ws")) > 1


def list_page_or_fragment(
    endpoint: str, url_args: dict[str, Any], page_template: str, fragment: str, **ctx: Any
) -> Response:
    """page_or_fragment, telling htmx which short URL to push (not the form's every field)."""
    response = page_or_fragment(page_template, fragment, **ctx)
    if is_fragment_request():
        response.headers["HX-Push-Url"] = url_for(endpoint, slug=ctx["row"].slug, **url_args)
    return response
