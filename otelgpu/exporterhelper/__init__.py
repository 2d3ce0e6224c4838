"""What an exporter that sends over a network shares with any other: the bounded sending queue
(`queue.py`), the retry sender that sends one request until it is accepted or given up
(`sender.py`, its waits from `retry.py`'s backoff), and their options under the Collector's
names (`config.py`: `sending_queue`, `retry_on_failure`). The wire format and transport stay in
the exporter.
"""
