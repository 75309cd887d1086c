"""verify's progress on stderr: one live line on a terminal, plain lines in a CI log."""

from __future__ import annotations

import io

from chunk_adapter.verify.progress import Progress

CHECK = {"event": "check", "name": "q5 / pct"}
RESULT = {"event": "result", "name": "q5 / pct", "verdict": "pass", "seconds": 1.25}


def test_a_ci_log_gets_a_plain_line_per_stage_and_per_finished_check() -> None:
    out = io.StringIO()
    progress = Progress(out, tty=False)
    progress.stage_started("[verify] stage 4/4 explore", "explore", 60)
    progress.event("explore", CHECK)
    progress.event("explore", RESULT)
    progress.finish()
    assert out.getvalue().splitlines() == [
        "[verify] stage 4/4 explore",
        "[verify] explore/q5 / pct: PASS (1.2 s)",
    ]


def test_verbose_also_shows_each_check_as_it_starts_and_quiet_shows_nothing() -> None:
    loud, quiet = io.StringIO(), io.StringIO()
    for out, verbosity in ((loud, 1), (quiet, -1)):
        progress = Progress(out, verbosity=verbosity, tty=False)
        progress.stage_started("[verify] stage 4/4 explore", "explore", 60)
        progress.event("explore", CHECK)
        progress.event("explore", RESULT)
    assert "[verify] explore: running q5 / pct" in loud.getvalue().splitlines()
    assert quiet.getvalue() == ""


def test_a_terminal_gets_one_status_line_rewritten_in_place() -> None:
    out = io.StringIO()
    progress = Progress(out, tty=True)
    progress.stage_started("[verify] stage 4/4 explore", "explore", 60)
    progress.event("explore", CHECK)
    progress.event("explore", RESULT)
    progress.event("explore", CHECK)
    progress.finish()
    text = out.getvalue()
    assert text.startswith("\r[verify] stage 4/4 explore\n")
    status = text.split("\n", 1)[1]
    assert "\n" not in status, "the status line must be rewritten, not repeated"
    assert "1 checks done, running q5 / pct" in status
    assert status.endswith("\r"), "finish() clears the status line"
