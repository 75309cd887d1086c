"""Adapters in separate processes over real connectors."""
