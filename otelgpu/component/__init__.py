"""What every component is built from, whatever its kind: the contracts (`component.py`: kinds,
settings, the host, the consumer interface), the registry of factories (`registry.py`), the
guard between components (`consumer.py`), the errors they raise (`errors.py`), and the shared
means they run on: a clock (`clock.py`), task cancellation (`tasks.py`), rate-limited logs
(`log_limits.py`), self-telemetry (`telemetry.py`) and listeners and memories kept across a
reload (`kept_listeners.py`).

Receivers, processors, exporters, extensions and the service import from here; nothing here
imports them. A line that two components would otherwise each write belongs here.
"""
