"""The sixth hold-out set's correct designs (docs/quality.md, twenty-ninth session),
written by a separate author from the contract: the scheduler's calls posted as messages
to owner threads (``mailbox``), state sharded over striped locks (``striped``), receive
rounds each on its own ``threading.Timer`` (``timer_rounds``). Factories:
``tests.quality.correct.sixth_pkg.<module>:make``."""
