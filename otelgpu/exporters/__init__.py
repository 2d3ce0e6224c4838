"""Exporters shipped with the agent."""
