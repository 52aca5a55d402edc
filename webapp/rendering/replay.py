"""What the playground's merge scrubber and "why this split?" panel show: the request values
they read, and a replay (webapp.rendering.segmentation) turned into token views for the template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import bpe
from webapp.refusals import UserError
from webapp.rendering.chips import NO_MARK, Chip, Mark, encoded_chips
from webapp.rendering.segmentation import REPLAY_MAX_BYTES, REPLAY_MAX_PAIRS, Replay
from webapp.rendering.token_display import TokenView, token_infos, token_view


def scrub_arg(values: Mapping[str, str], name: str) -> int | None:
    """The scrubber's k: absent means all merges; out of range is clamped by the caller."""
    raw = (values.get(name) or "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise UserError(
            f"{name} must be a whole number of merges, not {raw[:40]!r}.", status=400
        ) from None


def why_token_index(values: Mapping[str, str], chips: Sequence[Chip]) -> int:
    """Which token was asked about: `at`, the index of a clicked chip (a chip can join several
    tokens that split a character), or `token`, a 1-based token number typed into the form."""
    for name in ("at", "token"):
        raw = (values.get(name) or "").strip()
        if not raw:
            continue
        try:
            number = int(raw)
        except ValueError:
            raise UserError(
                f"{name} must be a whole number, not {raw[:40]!r}.", status=400
            ) from None
        if name == "token":
            return number - 1
        if not 0 <= number < len(chips):
            return -1
        return sum(len(c.ids) for c in chips[:number])
    raise UserError("Say which token to explain: click one, or give its number.", status=400)


def merge_views(tok: bpe.Tokenizer, merge: tuple[int, int, int] | None) -> list[TokenView]:
    """Left, right and merged token of the scrubber's merge k, whitespace shown."""
    if merge is None:
        return []
    return [
        token_view(info, invalid="hex", whitespace=True, colour=i)
        for i, info in enumerate(token_infos(tok, merge))
    ]


@dataclass(frozen=True)
class MarkedChips:
    """Tokens of one replay step as chips; `marks` flags the ones that step just made."""

    chips: list[Chip]
    marks: list[Mark]

    def __len__(self) -> int:
        return len(self.chips)


_JUST_MERGED: Mark = (" just-merged", " · just merged", ", just merged")


def _chips(
    tok: bpe.Tokenizer, ids: Sequence[int], marked: frozenset[int] | set[int] = frozenset()
) -> MarkedChips:
    chips = encoded_chips(tok, ids, invalid="hex", whitespace=True)
    return MarkedChips(chips, [_JUST_MERGED if i in marked else NO_MARK for i in range(len(ids))])


def replay_views(tok: bpe.Tokenizer, replay: Replay, page_ids: Sequence[int]) -> dict[str, Any]:
    """The replay as the template walks it: the start, then per step the learned pairs present
    (lowest rank first, capped), the one applied, and the tokens after it with the new ones
    marked; last, whether it ended in exactly the tokens the playground shows for that part."""
    steps = []
    for number, step in enumerate(replay.steps, start=1):
        pairs = []
        for (left, right), new_id in step.present[:REPLAY_MAX_PAIRS]:
            parts = token_infos(tok, (left, right))
            [merged] = token_infos(tok, [new_id])
            pairs.append(
                {
                    "left": token_view(parts[0], invalid="hex", whitespace=True, colour=0),
                    "right": token_view(parts[1], invalid="hex", whitespace=True, colour=1),
                    # The 0-based merge rank, as every chip and page says it. A tiktoken file
                    # ranks tokens by id instead, but its merges are derived in that order
                    # (bpe.rank_rule.derive_merges): the lowest merge rank is its lowest rank.
                    "rank": merged.rank,
                    "new_id": new_id,
                    "applied": (left, right) == step.applied,
                }
            )
        made = {p - i for i, p in enumerate(step.positions)}  # where the new tokens sit after
        [merged] = token_infos(tok, [step.new_id])
        steps.append(
            {
                "number": number,
                "pairs": pairs,
                "more_pairs": len(step.present) - len(pairs),
                "applied": token_view(merged, invalid="hex", whitespace=True, colour=2),
                "rank": merged.rank,
                "times": len(step.positions),
                "after": _chips(tok, step.after, made),
            }
        )
    window = _window_in_page(replay, page_ids)
    return {
        "replay": replay,
        "start": _chips(tok, replay.symbols),
        "steps": steps,
        "result": _chips(tok, replay.result),
        "matches_page": window is not None,
        "token_number": replay.token_index + 1,
        "max_bytes": REPLAY_MAX_BYTES,
        "mode": tok.mode,
        "rule": replay.rule,
        "whole": replay.whole,
        "special": replay.stages is None
        and replay.symbols == replay.result
        and len(replay.result) == 1
        and replay.result[0] in tok.special_tokens.values(),
        "stages": replay.stages,
        "added": replay.stages is not None and replay.stages.added,
    }


def _window_in_page(replay: Replay, page_ids: Sequence[int]) -> tuple[int, int] | None:
    """Where the replay's result sits in the page's encoding, around the clicked token."""
    n = len(replay.result)
    at = replay.token_index
    for lo in range(max(0, at - n + 1), at + 1):
        if list(page_ids[lo : lo + n]) == replay.result:
            return lo, lo + n
    return None
