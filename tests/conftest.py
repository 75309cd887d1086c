"""Project-wide pytest setup: ``--adapter`` picks the adapter under test."""

from __future__ import annotations

import pytest

from chunk_adapter.factory import REFERENCE, AdapterFactory, load_factory

ADAPTER_HELP = (
    "adapter factory to verify, as package.module:factory "
    f"(default: the reference adapter, {REFERENCE})"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chunk-adapter")
    group.addoption("--adapter", default=None, help=ADAPTER_HELP)


def pytest_report_header(config: pytest.Config) -> str:
    spec = config.getoption("--adapter") or REFERENCE
    return f"chunk-adapter: --adapter {spec}"


@pytest.fixture(scope="session")
def adapter_spec(pytestconfig: pytest.Config) -> str:
    spec: str = pytestconfig.getoption("--adapter") or REFERENCE
    return spec


@pytest.fixture(scope="session")
def adapter_factory(adapter_spec: str) -> AdapterFactory:
    """The factory named by ``--adapter`` (the reference adapter by default)."""
    return load_factory(adapter_spec)
