"""The server side of HTTP, shared by every component that serves a port (the prometheus
exporter, the health_check extension): the listener with its own thread and event loop
(`listener.py`), one connection's protocol (`connection.py`) and its requests parsed by
httptools within limits (`request_parser.py`), the bounded send buffer (`send_buffer.py`) and
gzip (`compression.py`). What a component serves is its own; how bytes come in and go out is
here.
"""
