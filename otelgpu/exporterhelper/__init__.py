"""What an exporter that sends over a network shares with any other: the bounded sending queue
(`queue.py`), retries with backoff (`retry.py`) and their options under the Collector's names
(`config.py`: `sending_queue`, `retry_on_failure`). The wire format and transport stay in the
exporter.
"""
