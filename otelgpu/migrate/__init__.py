"""`otelgpu migrate`: another exporter's settings turned into otelgpu's.

`dcgm_flags.py` holds dcgm-exporter's flags and environment variables (facts) and reads a
command line, an environment and its chart values the way that exporter does;
`dcgm_exporter.py` turns what was given into a pipeline file and otelgpu chart values: each
flag's option (`dcgm_pipeline.py`), dcgm-exporter's chart values (`dcgm_chart.py`), and the
YAML written (`dcgm_render.py`).
"""
