"""A correct ChunkAdapter whose factory forwards ``**options`` to a strict constructor.

The factory is a classmethod, ``StreamBridge.create(connector, **options)``, that
hands every keyword to ``__init__``, which declares the contract's keywords and
one option of its own: its signature says "any keyword", its constructor refuses
the rest with Python's own ``TypeError``. Inside, SAVE is a ``deque`` counted by a
``Semaphore``, RECV is woken by an ``Event``, both threads are one generic
``Worker(threading.Thread)`` class running a step function, and a registration's
token is its ``__slots__`` record. Written outside the suite's shapes; the first
draft had a real bug verify found (its RECV round read the registrations once
and then fetched for one that a cleanup had replaced, consuming the new
registration's chunk: stateful, R23) — fixed by re-checking under the lock
before every get, as the spec's RECV step 1 says.
"""

from .bridge import StreamBridge

__all__ = ["StreamBridge"]
