"""P3's import figures: what the modules the agent imported cost, in a fresh interpreter.

The modules are those a `python -X importtime` agent imported (`imported_modules`, from its
log), imported again by a fresh interpreter started the way the agent is (`python -S`, its
packages through PYTHONPATH, the same environment):

- `breakdown`: one group after another (ssl, stdlib, pydantic, yaml, grpc, protobuf, ...,
  otelgpu), VmRSS after each: what a group adds to those before it;
- `census` (`p3_rss.py --census`): each module's *own* cost, as `-X importtime`'s "self"
  column is its own time: what running its body (and, for an extension, loading it) added,
  the modules it imports counted apart. Two figures each: the Python bytes it allocated
  (tracemalloc: code objects, classes, constants, pydantic's schemas) and the VmRSS it added
  (that too, plus shared-library pages and C allocations; page-grained, so noisier). With
  each module, the chain that imported it first: what a lazy import would have to move.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

MIB = 1 << 20
_IMPORT_TIME = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|(\s*)(\S+)$")

# The breakdown's groups, imported in this order: a group's figure is what its modules add to
# those of the groups before it. Keys are top-level module names (or dotted prefixes).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ssl (libssl; asyncio imports it)", ("ssl", "_ssl", "_hashlib")),
    ("stdlib", ()),  # sys.stdlib_module_names, less the ssl group
    ("pydantic", ("pydantic", "pydantic_core", "annotated_types", "typing_extensions")),
    ("yaml", ("yaml", "_yaml")),
    ("grpc", ("grpc",)),
    ("protobuf + OTLP protos", ("google", "opentelemetry.proto")),
    ("OTel API + SDK (self-telemetry)", ("opentelemetry", "importlib_metadata", "zipp")),
    ("other third-party", ()),
    ("otelgpu", ("otelgpu",)),
)
# By top-level name: pydantic's typing_inspection, the OTel API's dependencies.
_ALSO = {
    "typing_inspection": "pydantic",
    "deprecated": "OTel API + SDK (self-telemetry)",
    "wrapt": "OTel API + SDK (self-telemetry)",
}
_OTHER = "other third-party"

# Both scripts start as the agent's entry point does (otelgpu/entry.py): pydantic's plugin
# loader replaced by the agent's, which finds none, before pydantic is imported (a tree from
# before that has no such module: its agent loaded pydantic's).
_AS_THE_AGENT = """
try:
    from otelgpu.service import pydantic_plugins
    pydantic_plugins.leave_out()
except ImportError:
    pass
"""

_BREAKDOWN = (
    _AS_THE_AGENT
    + """
import importlib, json, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
out = [('interpreter', 0, rss())]
for name, modules in json.loads(sys.stdin.read()):
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:
            pass
    out.append((name, len(modules), rss()))
print(json.dumps(out))
"""
)

# Each module's own cost: every loader is wrapped so that loading a module (an extension's
# create_module, any module's exec_module) is measured, less what the imports it makes meanwhile
# cost (measured the same way, one level down).
_CENSUS = (
    _AS_THE_AGENT
    + """
import importlib, json, sys, tracemalloc

def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024

STACK, OWN, BY = [], {}, {}

def measured(name, run):
    frame = [tracemalloc.get_traced_memory()[0], rss(), 0, 0]
    STACK.append((name, frame))
    try:
        return run()
    finally:
        STACK.pop()
        traced = tracemalloc.get_traced_memory()[0] - frame[0]
        resident = rss() - frame[1]
        own = OWN.setdefault(name, [0, 0])
        own[0] += traced - frame[2]
        own[1] += resident - frame[3]
        if STACK:
            STACK[-1][1][2] += traced
            STACK[-1][1][3] += resident

class Loader:
    def __init__(self, inner, name):
        self._inner, self._name = inner, name
    def __getattr__(self, attr):
        return getattr(self._inner, attr)
    def create_module(self, spec):
        return measured(self._name, lambda: self._inner.create_module(spec))
    def exec_module(self, module):
        return measured(self._name, lambda: self._inner.exec_module(module))

class Finder:
    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            find = getattr(finder, 'find_spec', None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is None:
                continue
            if hasattr(spec.loader, 'exec_module'):
                spec.loader = Loader(spec.loader, name)
                BY.setdefault(name, STACK[-1][0] if STACK else '')
            return spec
        return None

sys.meta_path.insert(0, Finder())
tracemalloc.start()
for module in json.loads(sys.stdin.read()):
    try:
        importlib.import_module(module)
    except Exception:
        pass
print(json.dumps([(m, t, r, BY.get(m, '')) for m, (t, r) in OWN.items()]))
"""
)


def imported_modules(log: str, *, roots: bool = False) -> list[str]:
    """The modules a `python -X importtime` process imported, in order, from its stderr; with
    `roots`, only those no other module imported (the program's own imports, at start or
    later, inside functions): importing them again imports the rest as the agent did."""
    found = []
    for line in log.splitlines():
        match = _IMPORT_TIME.match(line)
        if match and "__main__" not in match[2]:
            found.append((len(match[1]), match[2]))
    top = min((depth for depth, _ in found), default=0)
    return [name for depth, name in found if not roots or depth == top]


def group_of(module: str) -> str:
    """The breakdown group a module belongs to."""
    for name, keys in GROUPS:
        if any(module == k or module.startswith(k + ".") for k in keys):
            # `opentelemetry.proto` before `opentelemetry`: GROUPS lists protobuf first.
            return name
    top = module.split(".")[0]
    if top in _ALSO:
        return _ALSO[top]
    if top in sys.stdlib_module_names:
        return "stdlib"
    return _OTHER


def _run(python: list[str], script: str, payload: object, root: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [*python, "-c", script],
        cwd=root,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout


def breakdown(
    python: list[str], modules: list[str], root: Path, env: dict[str, str]
) -> list[tuple[str, int, float]]:
    """(group, modules in it, VmRSS after importing it and every group before) in a fresh
    interpreter under `env`; the first row is the bare interpreter."""
    by_group: dict[str, list[str]] = {name: [] for name, _ in GROUPS}
    for module in modules:
        by_group[group_of(module)].append(module)
    rows = json.loads(_run(python, _BREAKDOWN, list(by_group.items()), root, env))
    return [(name, n, float(rss)) for name, n, rss in rows]


def print_breakdown(
    label: str, modules: int, median: float, rows: list[tuple[str, int, float]]
) -> None:
    """One line per group: marginal MiB, modules, cumulative; then the agent's data (its
    median RSS less everything imported)."""
    print(f"import breakdown of the {label} run ({modules} modules; each group")
    print("imported after the ones above it, in a fresh interpreter, same environment):")
    before = 0.0
    for name, count, rss in rows:
        counted = f"{count:4d} modules" if name != "interpreter" else "    (python -c)"
        print(f"  {name:<34} {(rss - before) / MIB:+6.1f} MiB {counted}  -> {rss / MIB:5.1f} MiB")
        before = rss
    print(
        f"  {'data (agent median - all imports)':<34} {(median - before) / MIB:+6.1f} MiB"
        f"                 -> {median / MIB:5.1f} MiB"
    )


Own = tuple[str, int, int, str]  # module, own traced bytes, own VmRSS bytes, first importer


def census(python: list[str], roots: list[str], root: Path, env: dict[str, str]) -> list[Own]:
    """Each module's own cost in a fresh interpreter that imports `roots` (`imported_modules`
    with `roots`) in the agent's order (module docstring)."""
    rows = json.loads(_run(python, _CENSUS, roots, root, env))
    return [(str(m), int(t), int(r), str(importer)) for m, t, r, importer in rows]


def package_of(module: str) -> str:
    """Where a module's cost is summed: its top-level package, or for otelgpu its component
    (`otelgpu.exporters.prometheus`) or folder (`otelgpu.config`)."""
    parts = module.split(".")
    if parts[0] != "otelgpu" or len(parts) < 2:
        return parts[0]
    kinds = ("exporters", "processors", "receivers", "extensions")
    return ".".join(parts[:3] if parts[1] in kinds and len(parts) > 2 else parts[:2])


def print_census(rows: list[Own], top: int = 25) -> None:
    """The heaviest packages, then the heaviest modules with the chain that imported them."""
    by = {module: importer for module, _, _, importer in rows}
    packages: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for module, traced, resident, _ in rows:
        total = packages[package_of(module)]
        total[0] += traced
        total[1] += resident
        total[2] += 1
    traced = sum(t for _, t, _, _ in rows)
    resident = sum(r for _, _, r, _ in rows)
    print(
        f"imports census ({len(rows)} modules, each its own cost; fresh interpreter): "
        f"{traced / MIB:.1f} MiB of Python objects, {resident / MIB:.1f} MiB of VmRSS"
    )
    print(f"  by package (top {top}):               Python     VmRSS  modules")
    for name, (t, r, n) in sorted(packages.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"    {name:<34} {t / MIB:6.2f} MiB {r / MIB:6.2f} MiB  {n:4d}")
    print(f"  by module (top {top}), with who imported it first:")
    for module, t, r, _ in sorted(rows, key=lambda row: -row[1])[:top]:
        chain: list[str] = []
        at = by.get(module, "")
        while at and len(chain) < 4:
            chain.append(at)
            at = by.get(at, "")
        via = " <- ".join(chain) or "(the list)"
        print(f"    {t / MIB:5.2f} MiB {r / MIB:5.2f} MiB  {module}  <- {via}")
