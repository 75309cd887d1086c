"""R29, stream identity (an option of the reference adapter), on the in-process
connector. Every connector, the bug as measured and the give-up path:
tests/connectors/test_stream_identity.py."""

from __future__ import annotations

import pytest

from chunk_adapter.connectors import MemoryConnector
from tests.connectors.test_stream_identity import NEW, reuse_after_cleanup


@pytest.mark.rule("R29")
def test_with_discard_leftovers_a_reused_id_receives_only_its_own_stream() -> None:
    conn = MemoryConnector(consume_on_get=True)
    assert reuse_after_cleanup(conn, discard=True, overwrites=True) == NEW
