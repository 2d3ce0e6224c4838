"""Where each key and value of the merged configuration came from (file, line, column)."""

from __future__ import annotations

from dataclasses import dataclass, field

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Mark:
    """A place in a source: 1-based line and column, as editors and compilers print them."""

    file: str
    line: int
    column: int


@dataclass
class Positions:
    """Value and key marks indexed by key path, merged across `-c` files in order."""

    values: dict[Path, Mark] = field(default_factory=dict)
    keys: dict[Path, Mark] = field(default_factory=dict)

    def replace_subtree(self, path: Path, other: Positions) -> None:
        """Takes `other`'s marks at and under `path`, dropping ours there first."""
        n = len(path)
        for table in (self.values, self.keys):
            for p in [p for p in table if p[:n] == path]:
                del table[p]
        self.values.update({p: m for p, m in other.values.items() if p[:n] == path})
        self.keys.update({p: m for p, m in other.keys.items() if p[:n] == path})

    def value(self, path: Path) -> Mark:
        """The mark of the value at `path`, or of its nearest ancestor that has one."""
        return _nearest(self.values, path)

    def key(self, path: Path) -> Mark:
        """The mark of the key that names `path` (falls back to the value's mark)."""
        if path in self.keys:
            return self.keys[path]
        return self.value(path)


def _nearest(table: dict[Path, Mark], path: Path) -> Mark:
    for n in range(len(path), -1, -1):
        mark = table.get(path[:n])
        if mark is not None:
            return mark
    return Mark("<config>", 1, 1)
