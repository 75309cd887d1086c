"""The test bed under every driver: what stateful/, stress/, explore/ and verify/ share.

- :mod:`.stack`: :class:`Bed`, the connector stack of a run in one fixed order
  (memory, gated, faulty, recording, then the driver's own outer wrappers), its
  builders, and the adapters made from a factory (bounded when asked).
- :mod:`.progress`: :class:`Progress`, a connector wrapper that counts calls and
  wakes whoever waits for the connector to be called or to go quiet.
- :mod:`.pair`: :class:`AdapterPair`, a sender and a receiver adapter driven as
  the one adapter a scheduler sees.
- :mod:`.crashes`: :func:`thread_crashes`, the threads that died of an uncaught
  exception during a run (R22 is judged by those, not by which threads live).
- :mod:`.waiting`: bounded calls and waits (:func:`call_bounded`,
  :func:`wait_until`), the one place a driver waits with a deadline.

Keyword acceptance (``takes_keyword``, ``accepted_options``) lives with factory
loading in :mod:`chunk_adapter.factory`. See docs/architecture.md for the layers.
"""

from __future__ import annotations

from .crashes import thread_crashes
from .pair import AdapterPair
from .progress import Progress
from .stack import Bed
from .waiting import Hang, call_bounded, call_in_thread, holds_for, stopping, wait_until

__all__ = [
    "AdapterPair",
    "Bed",
    "Hang",
    "Progress",
    "call_bounded",
    "call_in_thread",
    "holds_for",
    "stopping",
    "thread_crashes",
    "wait_until",
]
