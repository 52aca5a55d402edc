"""The encode playground's state: what a page shows for some text, and short share links.

A share stores the text and the view state server-side behind a 128-bit slug, so a shared
link has no URL-length limit. The same text and state on the same tokeniser reuse one row
(found by a digest), so clicking "share" twice does not grow the table.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from flask import current_app
from sqlalchemy import select
from sqlalchemy.orm import Session

from webapp.refusals import UserError
from webapp.rendering.token_display import INVALID_RULES, InvalidRule
from webapp.storage.models import PlaygroundShare
from webapp.storage.slugs import new_slug

VIEWS = ("text", "ids")


class TextTooLarge(ValueError):
    """Playground or API text over the limit; answered with 413 and the limit."""


@dataclass(frozen=True)
class Display:
    """How tokens are shown; read from a form or query string, stored with a share."""

    view: str = "text"
    whitespace: bool = False
    invalid: InvalidRule = "group"
    specials: bool = True  # recognise the tokeniser's special tokens in the text

    @classmethod
    def from_args(cls, args: Any, *, whitespace_default: bool = False) -> Display:
        """From request args or form data; anything unknown falls back to the default."""
        view = args.get("view", "text")
        invalid = args.get("invalid", "group")
        # The form sends a hidden ws=0 after the checkbox, so "absent" means "use the default".
        ws_values = args.getlist("ws")
        whitespace = "1" in ws_values if ws_values else whitespace_default
        sp_values = args.getlist("specials")
        return cls(
            view=view if view in VIEWS else "text",
            whitespace=whitespace,
            invalid=invalid if invalid in INVALID_RULES else "group",
            specials="1" in sp_values if sp_values else True,
        )

    def query(self) -> dict[str, str]:
        """As query-string parameters, for links that keep the current state."""
        return {
            "view": self.view,
            "ws": "1" if self.whitespace else "0",
            "invalid": self.invalid,
            "specials": "1" if self.specials else "0",
        }


def check_text(text: str, *, max_bytes: int) -> None:
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise TextTooLarge(
            f"the text is {size:,} bytes; the playground takes at most {max_bytes:,} bytes "
            "(encode larger text with the command line or the downloaded tokeniser)"
        )


def _digest(text: str, display: Display) -> str:
    state = json.dumps(asdict(display), sort_keys=True)
    return hashlib.sha256(state.encode() + b"\0" + text.encode("utf-8")).hexdigest()


def save_share(
    session: Session,
    *,
    tokenizer_id: int,
    text: str,
    display: Display,
    owner_id: int | None = None,
) -> str:
    """Store text + view state (or find the identical share) and return its slug."""
    digest = _digest(text, display)
    existing = session.scalar(
        select(PlaygroundShare.slug).where(
            PlaygroundShare.tokenizer_id == tokenizer_id, PlaygroundShare.digest == digest
        )
    )
    if existing is not None:
        return existing
    options = {"whitespace": display.whitespace, "invalid": display.invalid}
    options["specials"] = display.specials
    share = PlaygroundShare(
        slug=new_slug(),
        tokenizer_id=tokenizer_id,
        owner_id=owner_id,
        text_utf8=text.encode("utf-8"),
        view=display.view,
        options=json.dumps(options),
        digest=digest,
    )
    session.add(share)
    session.flush()
    return share.slug


def load_share(session: Session, *, tokenizer_id: int, slug: str) -> tuple[str, Display] | None:
    share = session.scalar(
        select(PlaygroundShare).where(
            PlaygroundShare.tokenizer_id == tokenizer_id, PlaygroundShare.slug == slug
        )
    )
    if share is None:
        return None
    options = json.loads(share.options or "{}")
    invalid = options.get("invalid", "group")
    display = Display(
        view=share.view if share.view in VIEWS else "text",
        whitespace=bool(options.get("whitespace", False)),
        invalid=invalid if invalid in INVALID_RULES else "group",
        specials=bool(options.get("specials", True)),
    )
    return share.text_utf8.decode("utf-8"), display


def list_display(args: Any) -> Display:
    """Display state for lists of single tokens: whitespace shown by default, and no `group`
    rule (a token alone has no neighbours to join), so hex unless U+FFFD is asked for."""
    display = Display.from_args(args, whitespace_default=True)
    return replace(display, invalid="replace" if display.invalid == "replace" else "hex")


def check_playground_text(text: str) -> None:
    """The app's limit on text to encode (BPE_PLAYGROUND_MAX_BYTES): past it, a 413."""
    try:
        check_text(text, max_bytes=current_app.config["PLAYGROUND_MAX_BYTES"])
    except TextTooLarge as exc:
        raise UserError(str(exc), status=413) from None
