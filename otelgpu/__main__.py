"""`python -m otelgpu` and the `otelgpu` command: SIGHUP is held first, then the CLI runs.

The CLI's imports and the reading of the files take a good part of a second; a SIGHUP in that
time must not kill the agent (`otelgpu.service.early_signals`), so its handler is installed
before anything else is imported.
"""

from otelgpu.service import early_signals


def run() -> int:
    """The `otelgpu` console script."""
    held = early_signals.hold()
    from otelgpu.cli import main

    return main(held=held)


if __name__ == "__main__":
    raise SystemExit(run())
