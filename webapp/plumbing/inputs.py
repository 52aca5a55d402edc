"""What a request may send, checked once before any view runs or where a view reads a body:

- ids in URLs fit the database's integer columns (PostgreSQL's `integer`, the narrower of the
  two back ends): a bigger `<int:...>` does not match the route, so it is the same 404 as any
  unknown id instead of an overflow deep in the driver;
- URLs are at most MAX_URL_BYTES (414, answered by the app so the JSON API answers JSON);
- query strings, url-encoded and multipart form fields and JSON bodies are strict UTF-8:
  Werkzeug would turn a bad byte into U+FFFD silently (or keep it percent-encoded), and JSON's
  `\\ud800` escapes give lone surrogates that cannot be stored or encoded. Both are refused with
  400 naming the field and where the bad byte or character is;
- JSON bodies nest at most MAX_JSON_DEPTH deep (Python's parser would recurse until it fails);
- text typed into a form's box reaches the tokeniser as the person sees it (`box_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import IO, Any
from urllib.parse import unquote_to_bytes

from flask import Flask, Request, current_app, request
from werkzeug.datastructures import FileStorage, Headers, MultiDict
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.formparser import FormDataParser, MultiPartParser
from werkzeug.routing import IntegerConverter, Map

from webapp.refusals import UserError, human_bytes
from webapp.storage.models import DB_ID_MAX

MAX_URL_BYTES = 8192
MAX_JSON_DEPTH = 32
# No id, count or size the site takes needs more digits; Python refuses to convert integers of
# over 4,300 digits at all (a ValueError that is not a JSON error), so the bound is ours.
MAX_NUMBER_DIGITS = 20


class DatabaseId(IntegerConverter):
    """`<int:...>` limited to what an id column can hold."""

    def __init__(self, map: Map, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max", DB_ID_MAX)
        super().__init__(map, *args, **kwargs)


# ----- URL and form checks, before every request -------------------------------------------------
def check_request() -> None:
    url_bytes = len(request.full_path.encode("utf-8", "surrogateescape"))
    if url_bytes > MAX_URL_BYTES:
        raise UserError(
            f"The address is {url_bytes:,} bytes long; at most {MAX_URL_BYTES:,} are accepted."
            " Send long text in a POST body instead.",
            status=414,
        )
    _check_urlencoded(request.query_string, "query string")
    if request.mimetype == "application/x-www-form-urlencoded":
        length = request.content_length
        # Bigger (or unsized) bodies are the form parser's to refuse with its own 413.
        if length is not None and length <= current_app.config["MAX_FORM_MEMORY_SIZE"]:
            raw = request.get_data(cache=True)
            if not raw.isascii() or _may_hide_bad_bytes(request.form):
                _check_urlencoded(raw, "form")


def _may_hide_bad_bytes(form: MultiDict[str, str]) -> bool:
    """False when the parsed form proves every name and value was UTF-8: Werkzeug writes a byte
    that does not decode back as `%XX`, so a form without `%` in it had none. Parsing it here
    costs nothing extra (the view reads the same parsed form), and percent-decoding a 50 KB
    field of Chinese byte by byte again took longer than encoding it."""
    return any("%" in name or "%" in value for name, value in form.items(multi=True))


def _check_urlencoded(raw: bytes, where: str) -> None:
    if not raw:
        return
    for field in raw.split(b"&"):
        name, _, value = field.partition(b"=")
        for part, label in ((name, "name"), (value, "value")):
            data = unquote_to_bytes(part.replace(b"+", b" "))
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                shown = name.decode("ascii", "replace")
                note = ", after percent-decoding"
                raise _field_error(where, shown, label, data, exc, note) from None


def _field_error(
    where: str, name: str, label: str, data: bytes, exc: UnicodeDecodeError, note: str = ""
) -> UserError:
    return UserError(
        f"The {where} field {name[:40]!r} is not valid UTF-8: the first bad byte of its {label}"
        f" is at byte offset {exc.start} (0x{data[exc.start]:02x}{note}). Send text as UTF-8.",
        status=400,
    )


# ----- multipart form fields ----------------------------------------------------------------------
class _ByteKeepingMultiPartParser(MultiPartParser):
    """Werkzeug decodes each text field of a multipart body with errors="replace". Read as
    Latin-1, every byte becomes one character and nothing is lost, so StrictFormDataParser can
    decode the bytes again as strict UTF-8 (the only encoding our pages send)."""

    def get_part_charset(self, headers: Headers) -> str:
        return "latin-1"


class StrictFormDataParser(FormDataParser):
    """Form parsing whose multipart text fields are strict UTF-8 (files stay bytes)."""

    def _parse_multipart(
        self,
        stream: IO[bytes],
        mimetype: str,
        content_length: int | None,
        options: dict[str, str],
    ) -> tuple[IO[bytes], MultiDict[str, str], MultiDict[str, FileStorage]]:
        boundary = options.get("boundary", "").encode("ascii")
        if not boundary:
            raise ValueError("Missing boundary")  # Werkzeug's own answer: an empty form
        parser = _ByteKeepingMultiPartParser(
            stream_factory=self.stream_factory,
            max_form_memory_size=self.max_form_memory_size,
            max_form_parts=self.max_form_parts,
            cls=self.cls,
        )
        try:
            form, files = parser.parse(stream, boundary, content_length)
        except RequestEntityTooLarge:
            if content_length is None:
                raise  # a body of unknown length ran past the size limit as it was read
            # A known length passed the size limit before parsing began, so what ran over is a
            # limit of the form's own: too many parts, or too long a text field.
            raise UserError(
                f"The form is more than this site reads: at most {self.max_form_parts:,} parts,"
                f" and at most {human_bytes(self.max_form_memory_size or 0)} of text in a field"
                " (a file may be larger).",
                status=413,
            ) from None
        return stream, self.cls(_utf8_fields(form.items(multi=True))), files


def _utf8_fields(fields: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    for name, value in fields:
        data = value.encode("latin-1")
        try:
            yield name, data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # A UserError is no ValueError, so Werkzeug's parser lets it through to the handler.
            raise _field_error("form", name, "value", data, exc) from None


class StrictRequest(Request):
    form_data_parser_class = StrictFormDataParser


# ----- Text from a form's box -------------------------------------------------------------------
def box_text(values: MultiDict[str, str], name: str = "text") -> str:
    """A text field of an HTML form, with its line breaks as the person typed them.

    A browser submitting a form (plain, or htmx's multipart FormData) writes every line break of
    every field as CRLF, while the box itself never holds a CR: the value a script reads from a
    textarea has LF alone. Without this, the same text counts differently with and without
    JavaScript, and a pasted corpus learns `\\r\\n` merges it was never given. Uploaded files and
    JSON bodies are not forms and stay byte-exact.

    >>> box_text(MultiDict({"text": "line one\\r\\nline two\\r\\n"}))
    'line one\\nline two\\n'
    >>> box_text(MultiDict({}))
    ''
    """
    return values.get(name, "").replace("\r\n", "\n")


# ----- Token ids typed into a box ---------------------------------------------------------------
ID_SEPARATORS = re.compile(r"[\s,]+")
MAX_DECODE_IDS = 200_000  # a request's ids: the API's and the decode box's bound
MAX_ID_DIGITS = 12  # far above any vocabulary; keeps int() of a pasted digit run cheap


def parse_ids(text: str, *, max_ids: int) -> list[int]:
    """Ids as a person pastes them: separated by spaces, commas or lines, or a JSON list (what
    the playground's "ids as a list" and the API give). A clear 422 names the first item that
    is not a whole number; more than `max_ids` is a 413.

    >>> parse_ids("15339, 1917", max_ids=10), parse_ids("[1, 2]", max_ids=10)
    ([15339, 1917], [1, 2])
    >>> parse_ids("1 two", max_ids=10)
    Traceback (most recent call last):
    ...
    webapp.refusals.UserError: Item 2, 'two', is not a token id: ids are whole numbers from 0 up.
    """
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        stripped = stripped[1:-1]  # a JSON list of numbers is the same items between brackets
    items = [item for item in ID_SEPARATORS.split(stripped) if item]
    if len(items) > max_ids:
        raise UserError(f"At most {max_ids:,} ids at a time, not {len(items):,}.", status=413)
    ids = []
    for position, item in enumerate(items, start=1):
        if not (item.isascii() and item.isdigit()) or len(item) > MAX_ID_DIGITS:
            shown = item if len(item) <= 24 else item[:24] + "…"
            raise UserError(
                f"Item {position:,}, {shown!r}, is not a token id: ids are whole numbers from 0 up."
            )
        ids.append(int(item))
    return ids


# ----- JSON bodies -------------------------------------------------------------------------------
def json_body(example: str = "") -> Any:
    """The request's JSON body, parsed strictly; a clear 400 for anything else."""
    import json

    data = request.get_data(cache=True)
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"The JSON body is not valid UTF-8: the first bad byte is at byte offset {exc.start}"
            f" (0x{data[exc.start]:02x}).",
            status=400,
        ) from None
    try:
        value = json.loads(source, parse_int=_bounded_int)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        hint = f" Send e.g. {example}." if example else ""
        raise UserError(
            f"The body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            f" (character {exc.pos}).{hint}",
            status=400,
        ) from None
    _check_json_value(value)
    return value


def json_object(example: str) -> dict[str, Any]:
    """A JSON object body (Content-Type: application/json); `example` shows what to send."""
    if not request.is_json:
        raise UserError(
            f"Send a JSON object with Content-Type: application/json, e.g. {example}.", status=400
        )
    value = json_body(example)
    if not isinstance(value, dict):
        raise UserError(f"Send a JSON object, e.g. {example}.", status=400)
    return value


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise UserError(
            f"The JSON body holds a number of {len(digits.lstrip('-')):,} digits; numbers here"
            f" have at most {MAX_NUMBER_DIGITS}.",
            status=400,
        )
    return int(digits)


def whole_number(raw: str) -> int | None:
    """A form field's non-negative whole number, or None when it is not one: ASCII digits
    only (str.isdigit also takes '²' and other digits int() refuses), at most
    MAX_NUMBER_DIGITS of them.

    >>> whole_number("12"), whole_number(" 3 "), whole_number("²"), whole_number("9" * 5000)
    (12, 3, None, None)
    """
    text = raw.strip()
    if not text or len(text) > MAX_NUMBER_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def _too_deep() -> UserError:
    return UserError(f"The JSON body nests deeper than {MAX_JSON_DEPTH} levels.", status=400)


def _check_json_value(value: Any) -> None:
    """Depth and lone surrogates, walked without recursion; names the place of the problem."""
    stack: list[tuple[Any, str, int]] = [(value, "$", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_string(item, path)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(item, dict):
            for key, child in item.items():
                _check_string(key, f"{path} (a key)")
                stack.append((child, f"{path}.{key[:40]}", depth + 1))
        else:
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


def _check_string(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"{path} holds a lone surrogate (U+{ord(text[exc.start]):04X}) at character"
            f" {exc.start}: it is half of a UTF-16 pair and cannot be UTF-8. Send whole"
            " characters.",
            status=400,
        ) from None


def init_app(app: Flask) -> None:
    app.request_class = StrictRequest
    app.url_map.converters["int"] = DatabaseId
    app.before_request(check_request)
