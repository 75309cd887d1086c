"""The seventh hold-out set's correct designs (docs/quality.md, thirtieth session), written
by a separate author from the contract: no locks at all, state handed over by GIL-atomic
deque and dict operations (``lockfree``); versioned optimistic reads with one writer lock a
side (``seqlock``); receive rounds on immutable snapshots checked against a cleanup epoch
and per-registration generations (``epochs``). Factories:
``tests.quality.correct.seventh_pkg.<module>:make``."""
