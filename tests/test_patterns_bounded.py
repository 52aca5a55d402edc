"""Split patterns never run unbounded: refused where they enter (the train form, the JSON API,
a tiktoken import) when too big to compile or too slow on the probe texts, and every split of a
pattern that is not built in runs under a time limit (`bpe.patterns`), so a pattern stored
before the checks existed keeps its pages and answers its encodes with a 422 in bounded time.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import bpe
from bpe import patterns
from bpe.export_hf import to_hf_json
from bpe.export_tiktoken import rank_file_text
from bpe.patterns import (
    BUILT_IN_PATTERNS,
    MAX_PATTERN_CHARS,
    PatternRefused,
    PatternTimeout,
    check_pattern,
    check_pattern_size,
    split_chunks,
    split_seconds,
)
from bpe.pretokenize import BYTE_LEVEL_PATTERN
from tests.test_web_imports import upload
from webapp.storage.convert import store_tokenizer
from webapp.storage.models import TrainingJob

HUGE = ["a{1000000000}", "a{2000000}"]
CATASTROPHIC = r"(a|a)+$"
# Passes the probes (they hold no "q1q1..."), yet backtracks on that text: what only the time
# limit on every split bounds.
SLIPS_PAST_PROBES = r"(?:(?:q\d)+)+$"
SLOW_TEXT = "q1" * 250 + "!"
MEMORY_HEADROOM = 300 * 1024 * 1024  # the most any check here may add to a process's memory
CPU_MARGIN = 0.5  # seconds past a limit: the regex engine looks at its clock every so often


@contextmanager
def memory_cap(extra: int = MEMORY_HEADROOM) -> Iterator[None]:
    """Address space capped at what the process has plus `extra`: broken code that compiles
    `a{1000000000}` fails with a MemoryError here instead of taking the machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    in_use = _vm_size()
    resource.setrlimit(resource.RLIMIT_AS, (in_use + extra, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def quick_and_small(seconds: float = 1.0) -> Iterator[None]:
    """The block takes under `seconds` of CPU time (a shared machine's load stretches the wall
    clock) and leaves the process's peak memory within 50 MB: compiling `a{2000000}` alone took
    1 s and 500 MB."""
    before, started = _peak_rss(), time.process_time()
    with memory_cap():
        yield
    assert time.process_time() - started < seconds
    assert _peak_rss() - before < 50 * 1024 * 1024


# ----- the library: the size check and the probe check -------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        *((p, "at most 1,000 are allowed") for p in HUGE),
        ("a{١٠٠٠٠٠٠٠٠٠}", "1,000,000,000 times"),  # Arabic-Indic digits count too
        ("(?:(?:a{100}){100}){100}", "nest too deep"),
        ("(?:a{1000}){11}", "about 11,000 items"),
        ("(?:[)]a{100}){1000}", "nest too deep"),  # a `)` in a set closes no group
        ("(?x)(?:a{100} # )\n){100}", "nest too deep"),  # verbose: the comment hides a `)`
        ("a" * (MAX_PATTERN_CHARS + 1), "at most 2,000 are allowed"),
    ],
)
def test_the_size_check_refuses_before_compiling(pattern, words):
    with quick_and_small(0.2), pytest.raises(PatternRefused, match=words):
        check_pattern(pattern)
    with pytest.raises(PatternRefused):
        patterns.compile_pattern(pattern)  # nothing compiles a pattern past the bounds


@pytest.mark.parametrize("pattern", [CATASTROPHIC, r"(\w+\s?)+$", r"(a+)+b", r"(?:\s*)+\d$"])
def test_the_probe_check_refuses_backtracking_patterns(pattern):
    started = time.process_time()
    with pytest.raises(PatternRefused, match="backtracks"):
        check_pattern(pattern)
    assert time.process_time() - started < patterns.PROBE_TOTAL_SECONDS + CPU_MARGIN


@pytest.mark.parametrize("pattern", sorted(BUILT_IN_PATTERNS | {BYTE_LEVEL_PATTERN}))
def test_built_in_patterns_pass_the_checks_they_skip(pattern):
    # They run without a time limit (it costs `regex` ~0.5 us a match), so they must pass.
    assert pattern in BUILT_IN_PATTERNS
    check_pattern(pattern)


def test_ordinary_custom_patterns_pass():
    for pattern in (r"\p{N}{1,3}|\p{L}+|\s+", r"[^\s]{1,1000}", r"(?i:[a-z]{2,5})|\d{3}|."):
        check_pattern(pattern)
    check_pattern_size("(?:a{1000}){10}")  # exactly the bound: a group's `(?:` weighs nothing


def test_a_split_past_its_time_limit_is_a_pattern_timeout():
    check_pattern(SLIPS_PAST_PROBES)  # the probe check cannot promise everything
    started = time.process_time()
    with pytest.raises(PatternTimeout, match="backtracks too much") as caught:
        split_chunks(SLOW_TEXT, SLIPS_PAST_PROBES)
    assert caught.value.limit == split_seconds(len(SLOW_TEXT))
    assert time.process_time() - started < split_seconds(len(SLOW_TEXT)) + CPU_MARGIN
    assert isinstance(caught.value, ValueError)  # what callers of the library already catch


def test_one_time_limit_covers_all_of_a_texts_segments():
    """Special tokens cut a text into segments, split one by one: they share one limit, so
    many segments each just under a limit of their own do not add up past it."""
    tok = bpe.Tokenizer(
        mode="chunked", merges=[], pattern=SLIPS_PAST_PROBES, special_tokens={"<s>": 256}
    )
    segment = "q1" * 60 + "!"  # ~50 ms each, well under its own 1 s; 40 of them ~2 s
    text = (segment + "<s>") * 40
    started = time.process_time()
    with pytest.raises(PatternTimeout):
        tok.encode(text, allowed_special="all")
    assert time.process_time() - started < split_seconds(len(text)) + CPU_MARGIN


def test_the_scrubbers_segments_share_one_time_limit_too():
    tok = bpe.Tokenizer(
        mode="chunked", merges=[], pattern=SLIPS_PAST_PROBES, special_tokens={"<s>": 256}
    )
    text = ("q1" * 60 + "!<s>") * 40  # as in the test above
    started = time.process_time()
    with pytest.raises(PatternTimeout):
        bpe.stepwise.encode_chunks(tok, text, allowed_special="all", merge_limit=0)
    assert time.process_time() - started < split_seconds(len(text)) + CPU_MARGIN


def test_a_hf_pre_tokenizer_split_is_bounded():
    step = bpe.pretokenize.SplitStep(SLIPS_PAST_PROBES, "all")
    pre = bpe.pretokenize.PreTokenizer(splits=(step,))
    started = time.process_time()
    with pytest.raises(PatternTimeout):
        pre.pieces(SLOW_TEXT)
    assert time.process_time() - started < split_seconds(len(SLOW_TEXT)) + CPU_MARGIN


# ----- where patterns enter: the train form, the JSON API, a tiktoken import ---------------------
TRAIN = {"mode": "chunked", "vocab_size": "300", "trainer": "reference", "pattern": "custom"}


@pytest.fixture
def rank_file():
    tok = bpe.train("the cat sat on the mat " * 5, vocab_size=260, trainer="reference")
    return rank_file_text(tok).encode()


def _job_count(app) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.query(TrainingJob).count()


@pytest.mark.parametrize(
    ("pattern", "words"), [*((p, "at most 1,000") for p in HUGE), (CATASTROPHIC, "backtracks")]
)
def test_the_train_form_and_api_refuse_bad_patterns(app, client, make_corpus, pattern, words):
    corpus = make_corpus()
    with quick_and_small(2.0):
        form = client.post(f"/c/{corpus.slug}/train", data={**TRAIN, "custom_pattern": pattern})
        api = client.post(
            f"/api/corpora/{corpus.slug}/jobs",
            json={"mode": "chunked", "vocab_size": 300, "pattern": pattern},
        )
    assert form.status_code == 422 and words in form.get_data(as_text=True)
    assert api.status_code == 422 and words in api.get_json()["error"]
    assert _job_count(app) == 0


@pytest.mark.parametrize(
    ("pattern", "words"), [*((p, "at most 1,000") for p in HUGE), (CATASTROPHIC, "backtracks")]
)
def test_tiktoken_imports_refuse_bad_patterns(client, rank_file, pattern, words):
    side = json.dumps({"pat_str": pattern, "special_tokens": {}}).encode()
    with quick_and_small(2.0):
        answers = [
            upload(client, "/import", {"file": (rank_file, "r.tiktoken")}, pattern_regex=pattern),
            upload(
                client,
                "/api/tokenizers/import",
                {"file": (rank_file, "r.tiktoken")},
                pattern=pattern,
            ),
            upload(
                client,
                "/import",
                {"file": (rank_file, "r.tiktoken"), "sidecar": (side, "r.tiktoken.json")},
            ),
        ]
    for answer in answers:
        assert answer.status_code == 422
        assert words in answer.get_data(as_text=True)


def test_hf_imports_refuse_split_patterns_too_big_to_compile():
    """bpe/import_hf.py compiles each Split regex through `compile_pattern`, which holds the
    size check; the probe check (`check_pattern`) is for that module to call too."""
    tok = bpe.train("the cat sat on the mat " * 5, vocab_size=260, trainer="reference")
    for pattern in HUGE:
        data = json.loads(to_hf_json(tok))
        data["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": pattern}
        with quick_and_small(), pytest.raises(bpe.TokenizerFileError, match="at most 1,000"):
            bpe.importers.import_bytes(json.dumps(data).encode(), filename="tokenizer.json")


# ----- stored before the checks existed -----------------------------------------------------------
@pytest.fixture
def stored(app, make_corpus):
    """stored(pattern) -> the slug of a tokeniser with that pattern, written straight to storage
    as an older version (with no checks) would have."""
    corpus = make_corpus()
    trained = bpe.train("aaaa aaaa q1q1", vocab_size=258, trainer="reference")

    def _store(pattern: str) -> str:
        tok = dataclasses.replace(trained, pattern=pattern)
        with app.extensions["bpe_db"].session_scope() as session:
            return store_tokenizer(session, tok, corpus_id=corpus.id, owner_id=None).slug

    return _store


@pytest.mark.parametrize("pattern", [*HUGE, CATASTROPHIC, SLIPS_PAST_PROBES])
def test_a_stored_bad_pattern_keeps_its_pages_and_bounds_its_encode(client, stored, pattern):
    slug = stored(pattern)
    with quick_and_small(10.0):
        for page in (f"/t/{slug}", f"/t/{slug}/vocab", f"/t/{slug}/merges", f"/api/t/{slug}"):
            assert client.get(page).status_code == 200, page
        for text in ("aa", "a" * 40 + "!", SLOW_TEXT):
            started = time.process_time()
            api = client.post(f"/api/t/{slug}/encode", json={"text": text})
            spent = time.process_time() - started
            assert spent < split_seconds(len(text)) + CPU_MARGIN
            if api.status_code == 200:  # this pattern is quick on this text
                continue
            assert api.status_code == 422, api.get_data(as_text=True)
            assert "This text cannot be split" in api.get_json()["error"]
            page = client.get(f"/t/{slug}/encode", query_string={"text": text})
            assert page.status_code == 422 and "cannot be split" in page.get_data(as_text=True)


def test_a_stored_pattern_that_slips_past_the_probes_times_out_at_encode(client, stored):
    slug = stored(SLIPS_PAST_PROBES)
    api = client.post(f"/api/t/{slug}/encode", json={"text": SLOW_TEXT})
    assert api.status_code == 422 and "backtracks too much" in api.get_json()["error"]
    assert client.post(f"/api/t/{slug}/encode", json={"text": "q1!"}).status_code == 200
    typed = client.get(
        f"/t/{slug}/encode", query_string={"text": SLOW_TEXT}, headers={"HX-Request": "true"}
    )
    fragment = typed.get_data(as_text=True)  # the playground shows it in place, as it types
    assert typed.status_code == 422 and "cannot be split" in fragment
    assert "<html" not in fragment


def test_a_job_whose_split_times_out_fails_with_the_reason(app, client, make_corpus, job_runner):
    corpus = make_corpus(SLOW_TEXT)
    response = client.post(
        f"/c/{corpus.slug}/train", data={**TRAIN, "custom_pattern": SLIPS_PAST_PROBES}
    )
    assert response.status_code == 303  # it passes the entry checks
    job_runner.run_next()
    with app.extensions["bpe_db"].read_scope() as session:
        job = session.query(TrainingJob).one()
        assert job.status == "failed", job.error
        assert "backtracks too much" in (job.error or "")


# ----- properties: whatever the pattern, entry refuses it or the split is bounded ----------------
# `a\d` against texts of "a1": a shape the probe texts do not hold, left to the time limit.
_ATOMS = st.sampled_from(["a", "b", " ", "ab", r"a\d", r"\s", r"\w", r"\d", "[ab]", ".", r"\p{L}"])
_ENDS = st.sampled_from(["", "$", "!", r"\b"])
# The shapes that backtrack without end, on any atom.
_CATASTROPHIC = st.sampled_from(
    ["(?:{0}|{0})+", "(?:{0}+)+", "(?:{0}*)*", "(?:(?:{0})+)+", "{0}*{0}*{0}*{0}*{0}*"]
)


def _patterns() -> st.SearchStrategy[str]:
    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        count = st.sampled_from([1, 2, 3, 10, 999, 1000, 1001, 2_000_000, 10**9])
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "*", "?", "+?", "++"])).map("".join),
            st.tuples(inner, count).map(lambda t: f"(?:{t[0]}){{{t[1]}}}"),
            st.tuples(inner, count, count).map(
                lambda t: f"(?:{t[0]}){{{min(t[1:])},{max(t[1:])}}}"
            ),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),  # overlapping branches
            st.tuples(inner, inner).map("".join),
            inner.map(lambda p: f"({p})+"),  # nested quantifiers
        )

    body = st.recursive(_ATOMS, grow, max_leaves=6)
    catastrophic = st.builds(str.format, _CATASTROPHIC, _ATOMS)
    return st.tuples(st.one_of(body, catastrophic), _ENDS).map("".join)


_TEXTS = st.one_of(
    st.text(alphabet="ab !1\n", max_size=200),
    st.tuples(
        st.sampled_from(["a", "ab", " ", "1", "a ", "a1"]),
        st.integers(1, 400),
        st.sampled_from(["", "!", "\x00"]),
    ).map(lambda t: t[0] * t[1] + t[2]),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), text=_TEXTS)
@example(pattern="(?:a|a)+$", text="a" * 100 + "!")  # for the probes to refuse
@example(pattern=r"(?:(?:a\d)+)+$", text="a1" * 250 + "!")  # for the time limit to stop
def test_entry_refuses_or_the_split_is_bounded(pattern, text):
    try:
        check_pattern(pattern)
    except ValueError:
        return  # refused at entry, with its reason
    started = time.process_time()
    with suppress(PatternTimeout):
        split_chunks(text, pattern)
    assert time.process_time() - started < split_seconds(len(text)) + CPU_MARGIN


_MEMORY_PROBE = """
import json, resource, sys
from bpe.patterns import check_pattern, check_pattern_size
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for pattern in json.loads(sys.stdin.read()):
    try:
        check_pattern_size(pattern)
        check_pattern(pattern)
    except ValueError:
        pass
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024)
"""


@given(st.lists(_patterns(), min_size=20, max_size=20))
@settings(max_examples=3, deadline=None)
def test_checking_any_pattern_keeps_memory_small(batch):
    """Huge counts among them: the checks grow a fresh interpreter's peak memory by less than
    MEMORY_HEADROOM (the address space is capped there, so a blow-up fails instead)."""
    batch += ["(?:(?:a{10}){1000}){1000}", "(?:a{1000}){10}", *HUGE]
    limit = MEMORY_HEADROOM + 200 * 1024 * 1024  # plus the interpreter, `regex` and `bpe`
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import resource; resource.setrlimit(resource.RLIMIT_AS, "
            f"({limit}, {limit}))\n" + _MEMORY_PROBE,
        ],
        input=json.dumps(batch),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) < MEMORY_HEADROOM


@pytest.mark.parametrize("where", ["Split", "Replace"])
def test_hf_pipeline_imports_refuse_catastrophic_regexes(where):
    """A tokenizer.json's own Split or Replace regex is checked like every pattern that enters:
    `(a|a)+$` is refused at import, naming the part, not left to time out at every encode."""
    from bpe.byte_level import byte_level_string

    vocab = {byte_level_string(bytes([b])): b for b in range(256)}
    split = {"type": "Split", "pattern": {"Regex": "(a|a)+$"}, "behavior": "Isolated"}
    replace = {"type": "Replace", "pattern": {"Regex": "(a|a)+$"}, "content": "b"}
    document = {
        "added_tokens": [],
        "normalizer": replace if where == "Replace" else {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                split if where == "Split" else {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
            ],
        },
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }
    with quick_and_small(2.0), pytest.raises(bpe.TokenizerFileError, match=f"the {where} regex"):
        bpe.importers.import_bytes(json.dumps(document).encode(), filename="tokenizer.json")
