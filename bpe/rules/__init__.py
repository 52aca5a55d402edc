"""The encode rules, registered in one place: merges (ours), tiktoken, hf and hf_pipeline
(imported files).

A rule says how the merges inside one piece are applied (`bpe.rules.base.EncodingRule`); the
tokeniser finds its rule here by the name in `Tokenizer.rule`. To add a rule, write one module
with a subclass of `EncodingRule` (or of `ImportedRule`, for a rule read from a file: then only
`encode_new_piece` and `limited_encoder` are yours) and call `register_rule(YourRule())`.

Nothing here imports `bpe.model` at run time: the rules sit below the tokeniser.
"""

from __future__ import annotations

from bpe.rules.base import EncodingRule, ImportedRule
from bpe.rules.hf_merges import HF
from bpe.rules.hf_pipeline import HF_PIPELINE
from bpe.rules.merges import MERGES
from bpe.rules.tiktoken_ranks import TIKTOKEN

__all__ = ["EncodingRule", "ImportedRule", "get_rule", "register_rule", "rule_names"]

_registry: dict[str, EncodingRule] = {}  # name -> rule, in registration order


def register_rule(rule: EncodingRule) -> EncodingRule:
    """Make `rule` known by its name; returns it. Refuses a name already taken."""
    if not rule.name:
        raise ValueError(f"{type(rule).__name__} has no name: set the class attribute `name`")
    if rule.name in _registry:
        raise ValueError(f"a rule named {rule.name!r} is already registered")
    _registry[rule.name] = rule
    return rule


def get_rule(name: str) -> EncodingRule:
    """The rule registered under `name`; a ValueError naming the known ones otherwise."""
    try:
        return _registry[name]
    except KeyError:
        raise ValueError(f"unknown rule {name!r}; choose one of {', '.join(_registry)}") from None


def rule_names() -> tuple[str, ...]:
    return tuple(_registry)


for _rule in (MERGES, TIKTOKEN, HF, HF_PIPELINE):
    register_rule(_rule)
