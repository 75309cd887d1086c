"""The real connectors (shared memory, Redis) end to end."""
