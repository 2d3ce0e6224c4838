"""The data that flows through a pipeline: the metrics model (`model.py`: resources, metrics,
points, batches), the attribute names it carries (`semconv.py`: OpenTelemetry's where they exist,
ours beside them) and the notes a processor leaves on a resource for the next one (`notes.py`).

Everything imports this package and it imports nothing of the agent: a new kind of point, a new
attribute name or a new note belongs here.
"""
