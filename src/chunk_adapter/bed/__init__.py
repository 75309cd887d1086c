"""The test bed under every driver: what stateful/, stress/, explore/ and verify/ share.

- :mod:`.pair`: :class:`AdapterPair`, a sender and a receiver adapter driven as
  the one adapter a scheduler sees.
- :mod:`.waiting`: bounded calls and waits (:func:`call_bounded`,
  :func:`wait_until`), the one place a driver waits with a deadline.

Keyword acceptance (``takes_keyword``, ``accepted_options``) lives with factory
loading in :mod:`chunk_adapter.factory`. See docs/architecture.md for the layers.
"""

from __future__ import annotations

from .pair import AdapterPair
from .waiting import Hang, call_bounded, call_in_thread, holds_for, stopping, wait_until

__all__ = [
    "AdapterPair",
    "Hang",
    "call_bounded",
    "call_in_thread",
    "holds_for",
    "stopping",
    "wait_until",
]
