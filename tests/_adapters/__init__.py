"""Plumbing shared by the test suite's own third-party-style adapters.

:mod:`.plain` is the one plain-``threading`` base: the shapes under
``tests/explore/shapes`` and ``tests/stateful/pipeline_adapters`` build on it.
Its receiver and its request-id check are those of
``tests/quality/plain_threading_adapter`` (method for method), so the
receiver's code exists once in tests/.
"""
