"""A model's own chat template, rendered as transformers renders it, within limits.

transformers (`utils/chat_template_utils.py`, `apply_chat_template`) renders a
`tokenizer_config.json`'s `chat_template` in Jinja2's `ImmutableSandboxedEnvironment` with
`trim_blocks`, `lstrip_blocks` and the loop-control extension; it gives the template
`messages`, `add_generation_prompt`, `tools`, `documents` and the special tokens' texts
(`bos_token`, `eos_token`), the globals `raise_exception`, `strftime_now`, `dict` and a
`namespace` that refuses underscored names, a `tojson` filter that does not escape HTML, and a
`{% generation %}` block (rendered as its body). We give the same, so the same text comes out.

A template from an imported file is untrusted code: the sandbox keeps it from Python's insides,
and we add what the sandbox does not bound. Time: a trace function stops the template's own
lines after `time_limit` seconds. Size: every string or list the template builds (`~`, `+`,
`*`, `%`, filters, method calls, the blocks' buffers) is checked against `max_output`, and a
count or width that would build a bigger one is refused before it is built. Either way a
`TemplateLimit` says what happened. Jinja2 is imported on first use (`pip install Jinja2`):
the rest of the library does not need it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache
from types import FrameType
from typing import Any

from bpe.chat_types import ChatError, ChatTemplate, Message, TemplateLimit

TIME_LIMIT = 2.0  # seconds per rendering
MAX_OUTPUT = 2_000_000  # characters in any string (or items in any list) a template builds
BUILT_FACTOR = 20  # and all it builds in one rendering, in units of MAX_OUTPUT
_TEMPLATE_FILE = "<chat template>"
_WIDTH = re.compile(r"\d+")
_current = threading.local()  # the rendering under way in this thread: its _Limits


def render_template(
    chat: ChatTemplate,
    messages: Sequence[Message],
    *,
    add_generation_prompt: bool = True,
    time_limit: float = TIME_LIMIT,
    max_output: int = MAX_OUTPUT,
) -> str:
    """The conversation as the template writes it (what the model reads, before tokens).

    >>> chat = ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}")
    >>> render_template(chat, [Message("user", "hi")])
    '<user>hi'
    """
    compiled = _compile(chat.template)
    context = {
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "add_generation_prompt": add_generation_prompt,
        "tools": None,
        "documents": None,
        "bos_token": chat.bos_token,
        "eos_token": chat.eos_token,
    }
    jinja2 = _jinja()
    limits = _Limits(time_limit=time_limit, max_output=max_output)
    previous = sys.gettrace()
    _current.limits = limits
    sys.settrace(limits.trace)
    try:
        return str(compiled.render(context))
    except TemplateLimit:
        raise
    except jinja2.TemplateError as exc:
        raise ChatError(f"the chat template failed: {exc}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        raise ChatError(f"the chat template failed: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise TemplateLimit("the chat template recursed too deeply") from None
    except MemoryError:
        raise TemplateLimit("the chat template ran out of memory") from None
    finally:
        sys.settrace(previous)


class _Limits:
    """One rendering's clock and size bound, read by the trace function and the checks."""

    def __init__(self, *, time_limit: float, max_output: int) -> None:
        self.time_limit = time_limit
        self.max_output = max_output
        self.deadline = time.monotonic() + time_limit
        self.ticks = 0
        self.built = 0  # characters (or items) built so far, by every checked operation

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        # Only the template's own code is traced line by line: Jinja's runtime and ours run free.
        if frame.f_code.co_filename != _TEMPLATE_FILE:
            return None
        return self._line

    def _line(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        self.ticks += 1
        if self.ticks % 64 == 0 and time.monotonic() > self.deadline:
            raise TemplateLimit(
                f"the chat template ran for over {self.time_limit:g} s and was stopped "
                "(a loop that does not end?)"
            )
        return self._line

    def check(self, value: Any) -> Any:
        """One string or list built: not too big, and not one too many. Every piece a block
        buffers was built by a checked operation, so counting them all bounds what buffers
        hold before they are joined."""
        if isinstance(value, str | list | tuple):
            self.built += len(value)
            if len(value) > self.max_output or self.built > BUILT_FACTOR * self.max_output:
                raise self.too_big()
        return value

    def check_count(self, n: Any) -> None:
        """A repeat count or a width: refused before it builds something too big."""
        if isinstance(n, int) and not isinstance(n, bool) and abs(n) > self.max_output:
            raise self.too_big()

    def check_widths(self, text: Any) -> None:
        """A format string (`%` or `.format`) whose widths would pad past the bound."""
        if isinstance(text, str) and any(
            len(w) > 9 or int(w) > self.max_output for w in _WIDTH.findall(text)
        ):
            raise self.too_big()

    def too_big(self) -> TemplateLimit:
        return TemplateLimit(
            f"the chat template built a text of over {self.max_output:,} characters and was "
            "stopped (output that keeps growing?)"
        )


def _jinja() -> Any:
    try:
        import jinja2
    except ImportError:
        raise ChatError(
            "rendering a chat template needs Jinja2: pip install 'bpe-workbench[chat]'"
        ) from None
    return jinja2


@lru_cache(maxsize=64)
def _compile(template: str) -> Any:
    """The template compiled once per text (templates are long, and pages render many)."""
    jinja2 = _jinja()
    environment = _environment()
    try:
        return environment.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ChatError(
            f"the chat template is not valid Jinja (line {exc.lineno}: {exc})"
        ) from None


@lru_cache(maxsize=1)
def _environment() -> Any:
    jinja2 = _jinja()
    from jinja2 import nodes
    from jinja2.compiler import CodeGenerator
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedCodeGenerator(CodeGenerator):
        # Jinja joins buffers and `~` with runtime helpers no environment hook sees; rebinding
        # them in each compiled template's globals puts them under the size check.
        def writeline(self, x: str, node: Any = None, extra: int = 0) -> None:
            super().writeline(x, node, extra)
            if x.startswith("from jinja2.runtime import "):
                super().writeline(
                    "concat = environment.bounded_concat; str_join = environment.bounded_concat"
                    "; markup_join = environment.bounded_concat"
                )

    class GenerationBlock(Extension):
        # transformers marks assistant text with `{% generation %}`; rendered as its body.
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Callable[[], str]) -> str:
            return caller()

    class ChatEnvironment(ImmutableSandboxedEnvironment):
        code_generator_class = BoundedCodeGenerator
        intercepted_binops = frozenset(["+", "*", "**", "%"])

        def _limits(self) -> _Limits:
            # Per thread: one environment serves every rendering, and servers render in threads.
            limits: _Limits | None = getattr(_current, "limits", None)
            if limits is None:  # rendered outside render_template: the defaults
                limits = _current.limits = _Limits(time_limit=TIME_LIMIT, max_output=MAX_OUTPUT)
            return limits

        def bounded_concat(self, parts: Any) -> str:
            # Counted as it goes: `parts` may be the whole template's output, still being made.
            limits = self._limits()
            pieces, size = [], 0
            for part in parts:
                piece = str(part)
                size += len(piece)
                if size > limits.max_output:
                    raise limits.too_big()
                pieces.append(piece)
            return "".join(pieces)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            limits = self._limits()
            if operator in ("*", "**"):
                limits.check_count(right)
                limits.check_count(left)
                if operator == "**" and isinstance(right, int) and right > 64:
                    raise limits.too_big()
                sized = left if isinstance(left, str | list | tuple) else right
                count = right if sized is left else left
                if (
                    isinstance(sized, str | list | tuple)
                    and isinstance(count, int)
                    and len(sized) * count > limits.max_output
                ):
                    raise limits.too_big()
            if operator == "%":
                limits.check_widths(left)
            return limits.check(super().call_binop(context, operator, left, right))

        concat = bounded_concat  # the blocks' buffers, joined inside each render function

        def wrap_str_format(self, value: Any) -> Any:
            # `"{:>999999999}".format(x)` would build its gigabyte before any check of the result.
            wrapped = super().wrap_str_format(value)
            if wrapped is not None:
                self._limits().check_widths(value.__self__)
            return wrapped

        def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            limits = self._limits()
            for value in (*args, *kwargs.values()):
                limits.check_count(value)
            return limits.check(super().call(__context, __obj, *args, **kwargs))

    environment = ChatEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationBlock, jinja2.ext.loopcontrols],
    )
    for name, function in list(environment.filters.items()):
        environment.filters[name] = _bounded_filter(environment, function)
    environment.filters["tojson"] = _bounded_filter(environment, _tojson)
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.globals["dict"] = _TemplateDict()
    environment.globals["namespace"] = _namespace_class(jinja2)
    _compile_name(environment)
    return environment


def _compile_name(environment: Any) -> None:
    # Templates compile under one file name, which the trace function recognises.
    original = environment.compile

    def compile_as_template(source: Any, name: Any = None, filename: Any = None, **kw: Any) -> Any:
        return original(source, name, _TEMPLATE_FILE, **kw)

    environment.compile = compile_as_template


def _bounded_filter(environment: Any, function: Callable[..., Any]) -> Callable[..., Any]:
    def bounded(*args: Any, **kwargs: Any) -> Any:
        limits = environment._limits()
        for value in (*args, *kwargs.values()):
            limits.check_count(value)
        return limits.check(function(*args, **kwargs))

    # Keep what Jinja reads off a filter (pass_context, pass_environment ...).
    for attribute in ("jinja_pass_arg",):
        if hasattr(function, attribute):
            setattr(bounded, attribute, getattr(function, attribute))
    return bounded


def _raise_exception(message: str) -> None:
    raise _jinja().exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # As transformers' own: no HTML escaping, and its options.
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """`dict(...)` for templates, without the class itself (no attribute hacks through it)."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


@lru_cache(maxsize=1)
def _namespace_class(jinja2: Any) -> type:
    base = jinja2.utils.Namespace

    def check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscored names on a namespace ({name!r})"
            )

    class TemplateNamespace(base):  # type: ignore[misc, valid-type]
        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                check(name)
            base.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            check(name)
            base.__setitem__(self, name, value)

    return TemplateNamespace
