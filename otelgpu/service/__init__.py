"""The running agent above the components: the table of built-in component types
(`builtins.py`), the graph a validated configuration becomes (`graph.py`), one configuration's
start and stop (`service.py`), and the process around them (`agent.py`: reloads, signals, the
heap settled after start in `heap.py`, a CPU quota honoured in `cpu_limit.py`, the log format in
`logs.py`). Only the CLI imports this package, and the entry point its `early_signals`.
"""
