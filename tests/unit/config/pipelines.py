"""Pipeline texts the config tests build on: the smallest whole pipeline, and its part after
a `receivers:` block that names `nvml` (for tests that write that block themselves)."""

from __future__ import annotations

AFTER_RECEIVERS = """
exporters:
  debug:
service:
  pipelines:
    metrics: {receivers: [nvml], exporters: [debug]}
"""
# nvml (simulated) → debug
MINIMAL = "\nreceivers:\n  nvml: {backend: simulated}" + AFTER_RECEIVERS
