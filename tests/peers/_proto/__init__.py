"""Generated gRPC service stubs that only the tests' stand-ins use (`generate.py`)."""
