"""What the factory's signature says, read once per run: :class:`Keywords`.

``inspect.signature`` is slow and every execution asks which scenario options the
factory takes, whether it takes ``runtime=`` and ``logger=``, and how many put tries
its adapter defaults to. The answer is read once where a run is set up
(:class:`~..engine.execution.Setup`, :func:`~.plan.plan_control`) and passed on. What a
``**options`` factory turns out to refuse while it builds (:func:`~chunk_adapter.factory.
refused_keywords`) is still asked each time: that can change during a run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...factory import reference_factory, refused_keywords, surely_got

__all__ = ["Keywords"]


@dataclass(frozen=True)
class Keywords:
    """The keywords *factory* names, whether it takes any (``**kwargs``), and its default
    put tries, as its signature says (``readable`` ``False``: no signature, so no keyword)."""

    factory: Callable[..., Any]
    readable: bool
    declared: frozenset[str]
    any_keyword: bool
    default_put_tries: int | None

    @classmethod
    def of(cls, factory: Callable[..., Any]) -> Keywords:
        """Read *factory*'s signature (once: keep the result for the run). Refusals are
        those a :class:`~chunk_adapter.factory.LoadedFactory` in its ``__wrapped__`` chain
        learned: pass the loaded factory the run builds with."""
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            return cls(factory, False, frozenset(), False, _default_put_tries(factory))
        return cls(
            factory,
            True,
            frozenset(params),
            any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()),
            _default_put_tries(factory),
        )

    def takes(self, name: str) -> bool:
        """Whether the factory may be called with keyword *name* (as
        :func:`~chunk_adapter.factory.takes_keyword`): it names it or takes ``**kwargs``,
        and no build has refused it."""
        if not self.readable or name in refused_keywords(self.factory):
            return False
        return name in self.declared or self.any_keyword

    def accepted(self, options: dict[str, Any]) -> dict[str, Any]:
        """The subset of *options* the factory takes (as
        :func:`~chunk_adapter.factory.accepted_options`)."""
        if not self.readable:
            return {}
        if self.any_keyword:
            rejected = refused_keywords(self.factory)
            return {k: v for k, v in options.items() if k not in rejected}
        return {k: v for k, v in options.items() if k in self.declared}

    def known(self, options: dict[str, Any], built: Any) -> dict[str, Any]:
        """The *options* the adapter *built* surely got (as
        :func:`~chunk_adapter.factory.known_options`): the factory names the keyword, or
        (``**kwargs``, which may drop it) the adapter shows that value under that name."""
        named = self.declared - refused_keywords(self.factory)
        return surely_got(self.accepted(options), named.__contains__, built)

    def put_tries(self, options: dict[str, Any]) -> int | None:
        """The put tries the adapter runs with: the option, else the factory's default
        (``None``: unknown)."""
        if "put_tries" in options:
            return int(options["put_tries"])
        return self.default_put_tries


def _default_put_tries(factory: Callable[..., Any]) -> int | None:
    """The ``put_tries`` default of *factory*'s signature (the reference adapter's class for
    :func:`~chunk_adapter.factory.reference_factory`), if it is a count of tries."""
    if inspect.unwrap(factory) is reference_factory:
        from ...adapter import ChunkAdapter

        factory = ChunkAdapter
    try:
        param = inspect.signature(factory).parameters.get("put_tries")
    except (TypeError, ValueError):
        return None
    default = None if param is None else param.default
    if isinstance(default, bool) or not isinstance(default, int) or default < 1:
        return None  # not a count of tries (0 for "the adapter's own default"...): unknown
    return default
