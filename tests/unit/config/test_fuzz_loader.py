"""Fuzzing the loader: whatever the text, the only error is a ConfigError whose every issue is
located (file, line >= 1, column >= 1). Seeded with hostile documents (`HOSTILE`: odd tags,
recursive and exploding aliases, deep nesting, huge scalars) and every good and bad case of the
suites; bounded to a few hundred examples so CI stays fast."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from otelgpu.component.errors import ConfigError
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from tests.components import core_registry

TESTDATA = Path(__file__).parent / "testdata"
SUITES = sorted(TESTDATA.glob("*/*.yaml"))
HOSTILE = [
    "processors: !!bool maybe\n",
    "receivers:\n  nvml: &a {x: *a}\n",
    "receivers: {sample: {series: !!int abc, interval: !!float abc}}\n",
    "receivers: {sample: {tags: [!!timestamp 2020-99-99, !!int 0o999]}}\n",
    "receivers: {sample: {mode: !foo x, tags: !!python/name:os.system}}\n",
    "receivers: !!pairs [a: 1]\n",
    "receivers: {=: 1}\n",
    "a: &a {x: 1}\nb: &b {y: 2}\nreceivers:\n  sample:\n    <<: [*a, *b]\n",
    "x: " + "[" * 1500 + "]" * 1500 + "\n",
    "x: " + "{a: " * 1500 + "1" + "}" * 1500 + "\n",
    "receivers: {sample: {interval: 99999999999999999999h}}\n",
    "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
    "receivers: {sample: {series: " + "9" * 5000 + "}}\n",
    "? [a, b]\n: 1\n",
    "a: 1\n---\nb: 2\n",
    "a: \x07\n",
    "\ufeffreceivers: {}\n",
]
SEEDS = HOSTILE + [p.read_text() for p in SUITES]
TOKENS = [
    "&a ", "*a", "<<: ", "<<", "!!int ", "!!bool ", "!!float ", "!!timestamp ", "!!binary ",
    "!!set ", "!!omap ", "!!pairs ", "!!python/object:os.system ", "!foo ", "! ", "!!str ",
    "!!null ", "!!map ", "!!seq ", "[", "]", "{", "}", ": ", ", ", "\n  ", "\n", "- ", "=", "? ",
    "---\n", "...\n", "'", '"', "\t", "\x00", "\x85", "\u2028", "${env:X}", "${env:X:-y}", "$$",
    "99999999999999999999h", "1e999", ".nan", "0o7", "0x1F", "2020-01-01", "%YAML 1.1\n",
    "%TAG ! tag:x,2000:\n", "#", "|\n  ", ">-\n  ", "\ufeff", "~", "null", "yes", "receivers",
    "sample", "series", "interval", "tags", "mode", "service", "pipelines",
]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A seed with a few tokens inserted, spans deleted or duplicated."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["insert", "delete", "repeat"]))
        if edit == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)) :]
        else:
            text = text[:at] + text[at : at + draw(st.integers(1, 40))] * 3 + text[at:]
    return text


TEXTS = st.one_of(
    mutated(),
    st.lists(st.sampled_from(TOKENS), max_size=30).map("".join),
    st.text(max_size=80),
)
BOUNDED = settings(
    max_examples=250, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def assert_only_located_config_errors(sources: list[tuple[str, str]], sets: list[str]) -> None:
    try:
        validate(load(sources, sets, environ={"X": "1"}), core_registry())
    except ConfigError as exc:
        assert exc.issues, "a ConfigError without issues"
        names = {name for name, _ in sources} | {f"--set #{n}" for n in range(1, len(sets) + 1)}
        for issue in exc.issues:
            assert issue.file in names, issue
            assert issue.line >= 1 and issue.column >= 1, issue
            assert issue.message.strip(), issue


@BOUNDED
@given(TEXTS)
@example("receivers:\n  nvml: &a {x: *a}\n")
@example("processors: !!bool maybe\n")
def test_any_file_gives_a_config_or_located_errors(text: str) -> None:
    assert_only_located_config_errors([("f.yaml", text)], [])


@BOUNDED
@given(TEXTS.map(lambda t: t[:200]))
@example("!!int abc")
@example("[" * 1200)
@example("&a [*a]")
def test_any_set_value_gives_a_config_or_located_errors(value: str) -> None:
    base = next(p.read_text() for p in SUITES if p.parent.name == "good")
    assert_only_located_config_errors([("base.yaml", base)], [f"receivers.sample.tags={value}"])


def test_the_fuzzer_is_seeded_with_every_suite_case() -> None:
    assert len(SUITES) >= 50 and all(p.read_text() in SEEDS for p in SUITES)
