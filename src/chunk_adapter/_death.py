"""How the reference adapter's threads meet exceptions that are not ``Exception`` (R30).

``build_payload``, ``put`` and ``get`` are the caller's code, and R22 says an
``Exception`` they raise is that call's failure: counted, logged, survived. A
``BaseException`` that is not an ``Exception`` is one of two kinds:

* **a cancellation** (``asyncio.CancelledError``): the callee's own work was
  cancelled (an ``asyncio.run`` or ``wait_for`` inside a build). The adapter has
  no task to cancel, so it is that call's failure too (:func:`survived`);
* **a request to end** (``SystemExit``, ``KeyboardInterrupt``, anything else):
  a background thread can neither honour it nor honestly ignore it. The thread
  ends *loudly* (:func:`cause`): logged at CRITICAL, and the adapter's next
  ``save_async`` or ``load_async`` raises :class:`~.errors.AdapterFailed`
  naming it (``flush`` returns ``False`` at once), where Python alone would end
  the thread in silence and leave an adapter that accepts work and delivers
  nothing.
"""

from __future__ import annotations

import sys
import traceback

__all__ = ["cause", "survived"]


def survived() -> tuple[type[BaseException], ...]:
    """What the caller's code may raise and be that one call's failure (module doc): the
    ``except`` clause around each build, put and get names this."""
    asyncio = sys.modules.get("asyncio")  # no cancellation without asyncio loaded
    return (Exception,) if asyncio is None else (Exception, asyncio.CancelledError)


def cause(thread: str, exc: BaseException) -> str:
    """One line: which thread died of what, raised where."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        where = f", raised in {last.name} ({last.filename}:{last.lineno})"
    return f"the {thread} thread died of {exc!r}{where}"
