"""Adapters in the code layouts third parties write, for the explorer's substitution mode.

Each module (or package) here is a *correct* adapter that takes no working
``runtime=`` and uses the standard library's threading directly, in one shape
the explorer used to get wrong: a factory in a package ``__init__`` building a
class elsewhere, a base class and a subclass in two modules, a ``**options``
factory that drops ``runtime=``, a ``queue.Queue`` FIFO, a
``ThreadPoolExecutor`` SAVE worker, a ``Thread`` subclass plus a ``Timer``,
and ``from threading import RLock, Condition`` with ``perf_counter``. Some
also offer a variant with one seeded race bug. The shared bookkeeping is
:mod:`tests._adapters.plain`, which never names threading or time itself:
every lock, thread and clock is taken from the shape's own module (a clock is
passed to the base's ``join_all``).
"""
