"""The cause of a finding: its first violated check, without its particulars.

What a root cause is grouped by (:mod:`chunk_adapter.verify.groups`) and what a
baseline entry is matched by (:mod:`chunk_adapter.verify.baseline`, and in a
verify worker :mod:`.accepted`): one function, so a finding is named alike
wherever it is judged.
"""

from __future__ import annotations

import re

__all__ = ["cause_of", "causes_of", "signature"]

_KIND = re.compile(r"^\s*\[[a-z_-]+\]\s*")  # the explorer's "[violation] "
_RULE = re.compile(r"^\s*R\d{1,2}\s*:\s*")  # "R16: "
_NEXT_RULE = re.compile(r";\s*R\d{1,2}\s*:")  # "...; R15: ..." (several violations in one line)
_QUOTED = re.compile(r"(?<!\w)'[^']*'(?!\w)|(?<!\w)\"[^\"]*\"(?!\w)")  # not "registration's"
_NESTED = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|\([^()]*\)")
_NUMBER = re.compile(r"\b(\d+(\.\d+)?|None|True|False)\b")  # a value written bare
_QUALIFIER = re.compile(r"^(the |a |final )+")  # "final payload built" is "payload built"
_RUNS = re.compile(r"…(\s*…)+")  # "… …": one particular, however it was written
_TRAILING = re.compile(r"(\s*…)+$")  # "... [request 'a']": where it happened, not what
_SPACE = re.compile(r"\s+")


def cause_of(evidence: str) -> str:
    """The first violated check of *evidence*, without its particulars (module doc).

    The first violation's message, with quoted strings, bracketed values and
    numbers replaced by ``…`` (a value is a particular whatever its type: a
    chunk saved from ``2`` and one saved from ``[8, 'end']`` are one cause),
    cut at its first clause, without the particulars it ends with (the
    request and key): ``"R16: chunk 0 handed out ({'data': ['a', 1]}) was
    fetched by a get that began before this registration's load_async: ..."``
    becomes ``"chunk … handed out … was fetched by a get that began before this
    registration's load_async"``.
    """
    text = evidence.strip().splitlines()[0] if evidence.strip() else ""
    text = _NEXT_RULE.split(text, maxsplit=1)[0]
    text = _RULE.sub("", _KIND.sub("", text))
    text = _QUOTED.sub("…", text)
    previous = None
    while previous != text:  # innermost brackets first, until none are left
        previous = text
        text = _NESTED.sub("…", text)
    text = _NUMBER.sub("…", text)
    head = re.split(r": |; |, ", text, maxsplit=1)[0]
    head = _RUNS.sub("…", _SPACE.sub(" ", head).strip(" .;"))
    head = _QUALIFIER.sub("", _TRAILING.sub("", head))
    return head or "(no message)"


def causes_of(evidence: str) -> list[tuple[str, str]]:
    """``(rule, cause)`` of every violation *evidence*'s first line names, in order: a
    finding that saw several (``"R4: ...; R15: ...; R2: ..."``) has a cause for each."""
    line = evidence.strip().splitlines()[0] if evidence.strip() else ""
    line = _KIND.sub("", line)
    starts = [0] + [m.start() + 1 for m in _NEXT_RULE.finditer(line)]
    out = []
    for begin, end in zip(starts, [*starts[1:], len(line)], strict=True):
        part = line[begin:end].strip()
        rule = _RULE.match(part)
        if rule is not None:
            out.append((rule.group(0).split(":")[0].strip(), cause_of(part)))
    return out


def signature(rule: str, cause: str) -> str:
    """What a baseline entry and a root cause are matched by: ``"R16: chunk … handed out …"``."""
    return f"{rule or 'no rule'}: {cause}"
