"""Stage 1: env expansion on parsed values, merging several files, --set, merge keys and alias
uses, positions, and which source (a file, an override, the embedded default) an error names."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from otelgpu import cli
from otelgpu.component.component import ComponentID, Kind
from otelgpu.component.errors import ConfigError
from otelgpu.config import default_pipeline_text, loader
from otelgpu.config.loader import load
from otelgpu.config.schema import validate
from otelgpu.config.walker import MAX_ALIAS_USES
from tests.components import SampleReceiverConfig, core_registry
from tests.unit.config.pipelines import MINIMAL

BASE = """\
receivers:
  sample:
    interval: 2s
    tags: [a]
exporters:
  debug:
service:
  pipelines:
    metrics:
      receivers: [sample]
      exporters: [debug]
"""


def test_env_expansion_with_default_and_literal_dollar() -> None:
    text = 'receivers:\n  sample:\n    tags: ["${env:TEAM}", "${env:MISSING:-fallback}", "cost: $$5", "a$b"]\n'
    raw = load([("f.yaml", text)], environ={"TEAM": "ml"})
    assert raw.data["receivers"]["sample"]["tags"] == ["ml", "fallback", "cost: $5", "a$b"]


def test_env_value_cannot_inject_yaml() -> None:
    evil = "x\nexporters:\n  otlp: {}"
    text = 'receivers:\n  sample:\n    tags: ["${env:EVIL}"]\n'
    raw = load([("f.yaml", text)], environ={"EVIL": evil})
    assert raw.data["receivers"]["sample"]["tags"] == [evil]
    assert "exporters" not in raw.data


def test_env_expands_to_typed_value_through_the_model() -> None:
    text = BASE.replace("interval: 2s", "interval: ${env:INTERVAL}").replace(
        "tags: [a]", "series: ${env:SERIES}"
    )
    config = validate(
        load([("f.yaml", text)], environ={"INTERVAL": "250ms", "SERIES": "3"}), core_registry()
    )
    sample = config.components[Kind.RECEIVER][ComponentID("sample")]
    assert isinstance(sample, SampleReceiverConfig)
    assert sample.interval == 0.25 and sample.series == 3


def test_later_files_win_and_errors_point_at_the_file_that_said_it() -> None:
    override = "receivers:\n  sample:\n    series: zero\n"
    with pytest.raises(ConfigError) as info:
        validate(
            load([("base.yaml", BASE), ("override.yaml", override)], environ={}), core_registry()
        )
    assert str(info.value) == "override.yaml:3:13: receivers::sample::series: expected an integer"


def test_merge_keeps_keys_from_both_files() -> None:
    override = "receivers:\n  sample:\n    series: 4\n"
    raw = load([("base.yaml", BASE), ("override.yaml", override)], environ={})
    assert raw.data["receivers"]["sample"] == {"interval": "2s", "tags": ["a"], "series": 4}


def test_set_overrides_one_key_with_either_separator() -> None:
    raw = load(
        [("base.yaml", BASE)],
        ["receivers.sample.interval=5s", "receivers::sample::tags=[x, y]"],
        environ={},
    )
    assert raw.data["receivers"]["sample"]["interval"] == "5s"
    assert raw.data["receivers"]["sample"]["tags"] == ["x", "y"]


def test_set_errors_are_located_at_the_override() -> None:
    with pytest.raises(ConfigError) as info:
        validate(
            load([("base.yaml", BASE)], ["receivers.sample.series=lots"], environ={}),
            core_registry(),
        )
    assert str(info.value) == "--set #1:1:25: receivers::sample::series: expected an integer"


def _validate(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["validate", *args])
    return code, capsys.readouterr().err


def test_an_unknown_key_given_by_set_points_at_the_start_of_the_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(MINIMAL)
    code, err = _validate(["-c", str(path), "--set", "receivers.nvml.bogus=1"], capsys)
    assert code == 2
    assert err.splitlines()[1].startswith("--set #1:1:1: receivers::nvml::bogus: unknown key")


def test_set_without_equals_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"expected --set key.path=value"):
        load([("base.yaml", BASE)], ["receivers.sample.series"], environ={})


def test_a_long_bad_set_is_quoted_cut_and_marked() -> None:
    with pytest.raises(ConfigError) as info:
        load([("base.yaml", BASE)], ["receivers.sample.series" + "x" * 80], environ={})
    assert str(info.value) == (
        '--set #1:1:1: expected --set key.path=value (got "receivers.sample.series'
        + "x" * 34
        + '...")'
    )


def test_a_control_character_is_a_syntax_error_at_its_position() -> None:
    with pytest.raises(ConfigError) as info:
        load([("bell.yaml", "receivers:\n  sample: {a: \x07}\n")], environ={})
    assert str(info.value) == (
        "bell.yaml:2:15: syntax error: unacceptable character #x0007: special characters are "
        "not allowed"
    )


@pytest.mark.parametrize(
    "error",
    [
        yaml.YAMLError("the stream ended oddly\nmore detail"),
        yaml.MarkedYAMLError(problem="the stream ended oddly"),  # no mark of either kind
    ],
    ids=["unmarked", "marked-without-a-position"],
)
def test_a_yaml_error_without_a_position_is_placed_at_the_start_by_its_first_line(
    monkeypatch: pytest.MonkeyPatch, error: yaml.YAMLError
) -> None:
    """PyYAML positions its errors; one that comes without a position is still a syntax error
    of that file, at its first line and column, in one line."""

    def failing(_text: str) -> None:
        raise error

    monkeypatch.setattr(loader, "compose", failing)
    with pytest.raises(ConfigError) as info:
        load([("odd.yaml", "receivers: {}\n")], environ={})
    assert str(info.value) == "odd.yaml:1:1: syntax error: the stream ended oddly"


def test_inline_yaml_keeps_the_order_it_was_written_in() -> None:
    """`a::b::c` keys become nested mappings, in the order written: a pipeline's components
    and print-config's sections read in that order."""
    from otelgpu.config.loader import read_files

    ((name, text),) = read_files(
        ["yaml:receivers::nvml::backend: simulated\nexporters::debug::verbosity: detailed"]
    )
    assert name == "-c yaml #1"
    assert text == (
        "receivers:\n  nvml:\n    backend: simulated\nexporters:\n  debug:\n    verbosity: detailed\n"
    )


def test_inline_yaml_that_is_no_yaml_is_named_at_its_start() -> None:
    from otelgpu.config.loader import read_files

    with pytest.raises(ConfigError) as info:
        read_files(["yaml:[unclosed", "yaml:- a list"])
    lines = str(info.value).splitlines()
    assert lines[0] == "-c yaml #1:1:1: not YAML: while parsing a flow sequence"
    assert lines[-1] == "-c yaml #2:1:1: expected a mapping, such as a::b::c: value"


def test_missing_file_is_a_config_error(tmp_path: object) -> None:
    from otelgpu.config.loader import read_files

    with pytest.raises(ConfigError, match=r"nope.yaml:1:1: cannot read the file"):
        read_files(["nope.yaml"])


def test_an_error_in_the_embedded_default_names_it_as_the_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTELGPU_DEMO_ENDPOINT", "nowhere")
    code, err = _validate([], capsys)
    assert code == 2
    lines = default_pipeline_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "OTELGPU_DEMO_ENDPOINT" in text)
    column = lines[line - 1].index("$") + 1
    assert err.splitlines()[1] == (
        f"<embedded default pipeline>:{line}:{column}: exporters::prometheus::endpoint: "
        'invalid endpoint "nowhere": expected host:port, such as 0.0.0.0:9400'
    )


def test_every_error_of_several_files_is_reported_at_once() -> None:
    a = "receivers:\n  sample:\n    interval: ${env:NOPE}\n"
    b = "receivers: [\n"
    with pytest.raises(ConfigError) as info:
        load([("a.yaml", a), ("b.yaml", b)], environ={})
    files = [issue.file for issue in info.value.issues]
    assert files == ["a.yaml", "b.yaml"]


def test_empty_file_means_no_pipelines() -> None:
    with pytest.raises(ConfigError) as info:
        validate(load([("empty.yaml", "")], environ={}), core_registry())
    assert (
        str(info.value) == "empty.yaml:1:1: service::pipelines: at least one pipeline is required"
    )


UNSUPPORTED = "only plain strings, numbers, booleans, null, lists and mappings are read"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "receivers.sample.series=!!int abc",
            '--set #1:1:25: receivers::sample::series: invalid !!int value "abc"',
        ),
        (
            "receivers.sample.series=!!int 0o999",
            '--set #1:1:25: receivers::sample::series: invalid !!int value "0o999"',
        ),
        (
            "receivers.sample.mode=!!bool maybe",
            '--set #1:1:23: receivers::sample::mode: invalid !!bool value "maybe"',
        ),
        (
            "receivers.sample.mode=!foo x",
            f"--set #1:1:23: receivers::sample::mode: unsupported tag !foo: {UNSUPPORTED}",
        ),
        (
            "receivers.sample.mode=!!python/name:os.system",
            "--set #1:1:23: receivers::sample::mode: unsupported tag "
            f"!!python/name:os.system: {UNSUPPORTED}",
        ),
        (
            "receivers.sample.tags=!!pairs [a: 1]",
            f"--set #1:1:23: receivers::sample::tags: unsupported tag !!pairs: {UNSUPPORTED}",
        ),
        (
            "receivers.sample.mode==",
            '--set #1:1:23: receivers::sample::mode: "=" is YAML 1.1\'s value key, which is '
            'not supported: quote it ("=") to use it as text',
        ),
        (
            "receivers.sample.tags=&a [*a]",
            "--set #1:1:27: receivers::sample::tags::0: alias *a refers to a node that contains it",
        ),
        (
            "receivers.sample.tags=[",
            "--set #1:1:24: receivers::sample::tags: syntax error: "
            "expected the node content, but found '<stream end>'",
        ),
        (
            "receivers.sample.tags={x: [}",
            "--set #1:1:28: receivers::sample::tags: syntax error: "
            "expected the node content, but found '}'",
        ),
        (
            "receivers.sample.tags=" + "[" * 1200,
            "--set #1:1:123: receivers::sample::tags: nesting deeper than 100 levels",
        ),
        (
            ".".join(["a"] * 200) + "=1",
            "--set #1:1:1: nesting deeper than 100 levels",
        ),
    ],
    ids=lambda v: v if len(v) < 50 else v[:50],
)
def test_set_values_get_one_located_error_line(override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(load([("base.yaml", BASE)], [override], environ={}), core_registry())
    assert str(info.value).splitlines() == [expected]


def test_absurd_set_values_are_refused_with_a_position() -> None:
    with pytest.raises(ConfigError) as info:
        validate(
            load([("base.yaml", BASE)], ["receivers.sample.interval=99999999999999999999h"], {}),
            core_registry(),
        )
    assert str(info.value) == (
        "--set #1:1:27: receivers::sample::interval: "
        'duration "99999999999999999999h" is too long: at most 168h (7 days)'
    )


def test_merge_keys_work_in_a_set_value() -> None:
    raw = load(
        [("base.yaml", BASE)],
        ["receivers.sample={<<: [{series: 3}, {series: 9, mode: ramp}], interval: 4s}"],
        environ={},
    )
    assert raw.data["receivers"]["sample"] == {
        "interval": "4s",
        "series": 3,
        "mode": "ramp",
        "tags": ["a"],
    }


MERGE_HELP = (
    "receivers::nvml: the merge key << takes a mapping or a list of mappings, "
    "such as *defaults or [*a, *b]"
)


def _load(text: str) -> tuple[dict[str, object], list[str]]:
    raw = load([("f.yaml", text)], environ={})
    return raw.data, [str(i) for i in raw.issues]


def test_a_merge_key_with_a_plain_value_is_refused_at_that_value() -> None:
    data, issues = _load("receivers:\n  nvml:\n    <<: 5\n    backend: simulated\n")
    assert issues == [f"f.yaml:3:9: {MERGE_HELP}"]
    assert data["receivers"] == {"nvml": {"backend": "simulated"}}


def test_a_list_inside_a_merge_list_is_refused_and_not_merged() -> None:
    text = "base: &b {processes: true}\nreceivers:\n  nvml:\n    <<: [[*b]]\n"
    data, issues = _load(text)
    assert issues == [f"f.yaml:4:10: {MERGE_HELP}"]
    assert data["receivers"] == {"nvml": {}}


def test_exactly_the_limit_of_alias_uses_is_accepted() -> None:
    uses = ", ".join(["*a"] * MAX_ALIAS_USES)
    data, issues = _load(f"receivers:\n  nvml:\n    host_proc: &a /proc\n    devices: [{uses}]\n")
    assert issues == []
    assert data["receivers"]["nvml"]["devices"] == ["/proc"] * MAX_ALIAS_USES  # type: ignore[index]


def test_one_alias_use_over_the_limit_is_refused_at_that_use() -> None:
    uses = ", ".join(["*a"] * (MAX_ALIAS_USES + 1))
    with pytest.raises(ConfigError) as info:
        _load(f"receivers:\n  nvml:\n    host_proc: &a /proc\n    devices: [{uses}]\n")
    column = len("    devices: [") + MAX_ALIAS_USES * len("*a, ") + 1
    assert str(info.value) == (
        f"f.yaml:4:{column}: receivers::nvml::devices::{MAX_ALIAS_USES}: alias *a expands "
        f"beyond the limit of {MAX_ALIAS_USES} alias uses (an alias bomb?)"
    )


@pytest.mark.parametrize("uses", [5120, 5121])
def test_alias_uses_expand_to_10_mib_of_text_at_most(uses: int) -> None:
    """A 2 KiB value used 5120 times is 10 MiB of text: accepted; one use more is refused,
    at that use, naming the limit."""
    text = "x" * 2048
    many = ", ".join(["*t"] * uses)
    document = f"receivers:\n  sample:\n    mode: &t {text}\n    tags: [{many}]\n"
    if uses == 5120:
        data, issues = _load(document)
        assert issues == []
        assert data["receivers"]["sample"]["tags"] == [text] * uses  # type: ignore[index]
        return
    with pytest.raises(ConfigError) as info:
        _load(document)
    column = len("    tags: [") + 5120 * len("*t, ") + 1
    assert str(info.value) == (
        f"f.yaml:4:{column}: receivers::sample::tags::5120: alias *t expands beyond the limit "
        "of 10 MiB of text (an alias bomb?)"
    )


def test_bare_substitution_is_an_env_variable_as_in_the_collector() -> None:
    text = 'receivers:\n  sample:\n    tags: ["${TEAM}", "${MISSING:-fallback}"]\n'
    raw = load([("f.yaml", text)], environ={"TEAM": "ml"})
    assert raw.data["receivers"]["sample"]["tags"] == ["ml", "fallback"]


def test_file_substitution_reads_a_mounted_secret(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-${env:NOT_EXPANDED}\n\n")  # kubelet-mounted secrets often end in \n
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    text = f'receivers:\n  sample:\n    tags: ["Bearer ${{file:{token}}}", "${{file:{pem}}}"]\n'
    raw = load([("f.yaml", text)], environ={})
    assert not raw.issues
    bearer, ca = raw.data["receivers"]["sample"]["tags"]
    assert bearer == "Bearer s3cr3t-${env:NOT_EXPANDED}"  # what a file says is never expanded
    assert ca == "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"


def test_file_substitution_errors_are_positioned(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2**20 + 1))
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe")
    text = (
        "receivers:\n  sample:\n"
        f'    tags: ["${{file:{big}}}",\n           "${{file:{binary}}}", "${{file:{tmp_path}}}"]\n'
    )
    raw = load([("f.yaml", text)], environ={})
    assert [str(i) for i in raw.issues] == [
        f'f.yaml:3:12: receivers::sample::tags::0: "${{file:{big}}}" is larger than 1024 KiB',
        f'f.yaml:4:12: receivers::sample::tags::1: "${{file:{binary}}}" is not UTF-8 text',
        f"f.yaml:4:{text.splitlines()[3].rindex(chr(34) + chr(36)) + 1}: receivers::sample::tags::2: "
        f'cannot read "${{file:{tmp_path}}}": Is a directory',
    ]
