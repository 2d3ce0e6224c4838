"""`python -m otelgpu` runs the CLI through `otelgpu.entry`, as the `otelgpu` script does."""

from otelgpu.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
