"""The fifth hold-out set's correct designs (docs/quality.md, twenty-eighth session),
written by a separate author from the contract: event-sourced (``journal``), per-request
actors on a pool of two SAVE workers (``actor_pool``), two RECV workers each owning a lane
of registrations (``rx_pool``). Factories: ``tests.quality.correct.fifth_pkg.<module>:make``."""
