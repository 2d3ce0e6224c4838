"""The service: builds the component graph from a validated config, starts and stops it."""
