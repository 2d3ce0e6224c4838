"""Receivers shipped with the agent."""
