"""The test suite, a package: helpers are imported by their package path (tests.unit._wait)."""
