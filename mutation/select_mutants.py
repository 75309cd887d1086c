"""Which of cosmic-ray's mutants the mutation run tests: a scope filter and a seeded sample.

``cosmic-ray init`` writes every mutant of the reference adapter (~830) into a
session; verifying one takes 10–60 s, so the run tests a sample and marks the
rest SKIPPED (as cosmic-ray's own ``cr-filter-operators`` does). Three steps,
each reported with its count (docs/quality.md, "What is mutated"):

1. **Scope**: mutants inside code that only reports are left out — the
   functions in ``[cosmic-ray.filters.chunk-adapter]`` ``exclude-definitions``
   (``check_invariants``, ``stats``, ``__repr__``, ``threads``: verify checks
   the adapter as a black box through the contract's calls and never calls
   them), the arguments of ``self.log.*`` calls (log text is not part of
   the contract), and type annotations (never evaluated: the modules use
   ``from __future__ import annotations``, so such a mutant is equivalent).
2. **One per site**: an operator family (``ReplaceBinaryOperator``,
   ``ReplaceComparisonOperator`` ...) makes up to 10 mutants at one source
   position (``+`` to ``-``, ``*``, ``/`` ...); one of them, chosen by the
   seed, stands for that position.
3. **Sample**: ``sample`` of the remaining sites, chosen by the seed.

A mutant is named by ``module:line:col:operator:occurrence``, the same in every
session made from the same source, so shards of one run agree on the sample.
"""

from __future__ import annotations

import ast
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Mutant", "Selection", "annotation_spans", "log_call_spans", "select"]


@dataclass(frozen=True)
class Mutant:
    """One cosmic-ray mutation, by the fields that stay the same across sessions."""

    module: str
    operator: str
    occurrence: int
    line: int
    col: int
    definition: str | None

    @property
    def key(self) -> str:
        return f"{self.module}:{self.line}:{self.col}:{self.operator}:{self.occurrence}"

    @property
    def family(self) -> str:
        """``core/ReplaceBinaryOperator_Add_Sub`` -> ``ReplaceBinaryOperator``."""
        return self.operator.split("/")[-1].split("_")[0]


@dataclass(frozen=True)
class Selection:
    generated: int
    out_of_scope: int
    sites: int
    chosen: tuple[Mutant, ...]


Span = tuple[tuple[int, int], tuple[int, int]]


def log_call_spans(source: str) -> list[Span]:
    """The (start, end) positions of every ``self.log.<level>(...)`` call's arguments.

    Also ``(self.log.warning if first else self.log.debug)(...)``. Lines are
    1-based and columns 0-based, as cosmic-ray's positions.
    """
    spans: list[Span] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not _is_log(node.func):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if arg.end_lineno is None or arg.end_col_offset is None:
                continue
            spans.append(((arg.lineno, arg.col_offset), (arg.end_lineno, arg.end_col_offset)))
    return spans


def annotation_spans(source: str) -> list[Span]:
    """The (start, end) positions of every annotation: arguments, returns, annotated names."""
    spans: list[Span] = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for ann in found:
            if ann is None or ann.end_lineno is None or ann.end_col_offset is None:
                continue
            spans.append(((ann.lineno, ann.col_offset), (ann.end_lineno, ann.end_col_offset)))
    return spans


def _is_log(func: ast.expr) -> bool:
    if isinstance(func, ast.IfExp):
        return _is_log(func.body) and _is_log(func.orelse)
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "log"
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "self"
    )


def _out_of_scope_spans(source: str) -> list[Span]:
    if "from __future__ import annotations" not in source:
        return log_call_spans(source)  # annotations are evaluated: mutants there count
    return log_call_spans(source) + annotation_spans(source)


def _inside(pos: tuple[int, int], spans: Iterable[Span]) -> bool:
    return any(start <= pos < end for start, end in spans)


def select(
    mutants: Sequence[Mutant],
    *,
    exclude_definitions: Iterable[str],
    sample: int | None,
    seed: int,
    root: Path = Path("."),
) -> Selection:
    """Scope, one per site, then a seeded sample of *sample* sites (all when None)."""
    if sample is not None and sample < 1:
        raise ValueError(f"sample must be a positive number of sites or None, got {sample!r}")
    excluded = set(exclude_definitions)
    spans = {
        module: _out_of_scope_spans((root / module).read_text(encoding="utf-8"))
        for module in {m.module for m in mutants}
    }
    in_scope = [
        m
        for m in mutants
        if m.definition not in excluded and not _inside((m.line, m.col), spans[m.module])
    ]
    rng = random.Random(seed)
    by_site: dict[tuple[str, int, int, str], list[Mutant]] = defaultdict(list)
    for m in in_scope:
        by_site[(m.module, m.line, m.col, m.family)].append(m)
    sites = sorted(by_site)
    one_each = [rng.choice(sorted(by_site[s], key=lambda m: m.key)) for s in sites]
    chosen = one_each if sample is None else rng.sample(one_each, min(sample, len(one_each)))
    chosen.sort(key=lambda m: (m.module, m.line, m.col, m.operator))
    return Selection(
        generated=len(mutants),
        out_of_scope=len(mutants) - len(in_scope),
        sites=len(sites),
        chosen=tuple(chosen),
    )
