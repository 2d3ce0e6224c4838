"""The agent's error types.

    OtelgpuError
    ├── ConfigError      the configuration is invalid; carries every issue found
    ├── StartError       a component failed to start; names it
    └── ExportError      one export attempt failed; says whether a retry may succeed

Only the CLI turns these into exit codes. After start-up, components catch their own
failures, count them and carry on; these types never escape a running pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass


class OtelgpuError(Exception):
    """Root of every error the agent raises on purpose."""


@dataclass(frozen=True, slots=True)
class Issue:
    """One configuration problem, located in the file that caused it."""

    file: str
    line: int
    column: int
    path: tuple[str | int, ...]
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        if not self.path:
            return f"{where}: {self.message}"
        return f"{where}: {'::'.join(str(p) for p in self.path)}: {self.message}"


class ConfigError(OtelgpuError):
    """The configuration is invalid. `str()` lists every issue, one per line."""

    def __init__(self, issues: list[Issue] | tuple[Issue, ...]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


class StartError(OtelgpuError):
    """A component failed to start; the service has shut down what had started."""

    def __init__(self, component: str, kind: str, cause: BaseException) -> None:
        self.component = component
        self.kind = kind
        self.cause = cause
        super().__init__(f'failed to start "{component}" {kind}: {cause}')


class ExportError(OtelgpuError):
    """One export attempt failed; `retryable` says whether sending again may succeed."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        self.retryable = retryable
        self.retry_after = retry_after
        super().__init__(message)
