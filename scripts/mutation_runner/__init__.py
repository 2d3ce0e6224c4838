"""A small AST mutation tester for otelgpu's core modules (see docs/dev/mutation.md)."""
