"""Project-wide pytest setup.

The ``--adapter`` option and the ``adapter_factory`` / ``adapter_spec``
fixtures come from the package's pytest plugin (chunk_adapter.pytest_plugin,
registered through the ``pytest11`` entry point), so the project's tests and a
user's tests see the same flags.
"""
