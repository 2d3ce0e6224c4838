"""`otelgpu migrate`: another exporter's settings turned into otelgpu's.

`dcgm_flags.py` holds dcgm-exporter's flags and environment variables (facts) and reads a
command line, an environment and its chart values the way that exporter does;
`dcgm_exporter.py` turns what was given into a pipeline file and otelgpu chart values.
"""
