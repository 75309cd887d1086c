"""The eighth hold-out set's correct designs (docs/quality.md, thirtieth session), written
by a separate author from the contract, each on an asyncio event loop in a background
thread: every call bridged into one loop by ``call_soon_threadsafe`` (``aio_bridge``); a
task per request stream and a dispatcher with one get in flight per registration
(``aio_lanes``); a task per chunk chained on the one before, receive rounds each
scheduling the next (``aio_chain``). Factories:
``tests.quality.correct.eighth_pkg.<module>:make``."""
