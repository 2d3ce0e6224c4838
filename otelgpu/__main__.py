"""`python -m otelgpu` runs the CLI."""

from otelgpu.cli import main

raise SystemExit(main())
