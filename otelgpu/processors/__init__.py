"""Processors shipped with the agent."""
