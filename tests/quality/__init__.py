"""Seeded bugs the suite must find, and correct adapters it must pass.

Imported by their package path, ``tests.quality.<module>``, also as ``--adapter``
specs, so each module exists once in a process.
"""
