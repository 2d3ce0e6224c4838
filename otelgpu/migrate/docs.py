"""The flag table and the counters-CSV field table of docs/migrating-from-dcgm-exporter.md.

Both are rendered from the tables the code uses (`dcgm_flags.FLAGS`, `counters_select`), and
a test holds the document's blocks between the markers equal to what this renders:
`python -m otelgpu.migrate.docs` rewrites them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from otelgpu.migrate.dcgm_flags import FLAGS, Flag
from otelgpu.receivers.nvml.counters_csv import EXPORTER_FIELDS, LEGACY_NAMES
from otelgpu.receivers.nvml.counters_select import LABELS, NOT_SERVED, SERVED, verdict

FLAGS_BLOCK = "flags"
FIELDS_BLOCK = "fields"
# Fields of dcgm-exporter's shipped CSV files that otelgpu does not serve by name, besides the
# served ones (every field a row of etc/default-counters.csv or dcp-metrics-included.csv names,
# enabled or commented out).
_MORE_FIELDS = ("DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE")


def _flag_row(flag: Flag) -> str:
    names = " ".join(f"`-{a}`" for a in flag.aliases)
    spelled = f"`--{flag.name}`" + (f" ({names})" if names else "")
    env = "<br>".join(f"`{e}`" for e in flag.env)
    otelgpu = flag.otelgpu if flag.otelgpu else f"**none**: {flag.reason}"
    return f"| {spelled} | {env} | {otelgpu.replace('|', chr(92) + '|')} |"


def flag_table() -> str:
    """Every dcgm-exporter flag, its environment variables, and otelgpu's equivalent."""
    equivalent = sum(bool(f.otelgpu) for f in FLAGS)
    lines = [
        f"{len(FLAGS)} flags: {equivalent} with an equivalent, {len(FLAGS) - equivalent} "
        "without (the reason is given).",
        "",
        "| dcgm-exporter flag | environment | otelgpu |",
        "|---|---|---|",
        *(_flag_row(flag) for flag in FLAGS),
    ]
    return "\n".join(lines)


def field_table() -> str:
    """What each field a counters-CSV row can name turns into."""
    fields = list(dict.fromkeys([*SERVED, *LABELS, *NOT_SERVED, *EXPORTER_FIELDS, *_MORE_FIELDS]))
    legacy = {field: name for name, field in LEGACY_NAMES.items()}
    lines = [
        "| Field (1.x name) | Served as | Note or reason |",
        "|---|---|---|",
    ]
    for field in sorted(fields):
        v = verdict(field)
        name = f"`{field}`" + (f" (`{legacy[field]}`)" if field in legacy else "")
        if v.metric:
            served = f"`{v.metric}`" + (f" `{v.key}={v.value}`" if v.key else "")
            lines.append(f"| {name} | {served} | {v.note} |")
        elif v.served:
            lines.append(f"| {name} | label | {v.note} |")
        else:
            lines.append(f"| {name} | **not served** | {v.reason} |")
    return "\n".join(lines)


def _blocks() -> dict[str, str]:
    return {FLAGS_BLOCK: flag_table(), FIELDS_BLOCK: field_table()}


def rewrite(text: str) -> str:
    """`text` with every generated block replaced by what this module renders now."""
    for name, body in _blocks().items():
        pattern = re.compile(
            rf"(<!-- generated:{name} [^\n]*-->\n)(?:.*?\n)?(<!-- end:{name} -->)", re.S
        )
        found = pattern.search(text)
        if found is None:
            raise ValueError(f"no generated:{name} block")
        fresh = found.group(1) + body + "\n" + found.group(2)
        text = text[: found.start()] + fresh + text[found.end() :]
    return text


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/migrating-from-dcgm-exporter.md")
    path.write_text(rewrite(path.read_text()))
