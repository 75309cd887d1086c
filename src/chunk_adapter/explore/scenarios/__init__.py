"""What an execution runs: a :class:`~.scenario.Scenario` (a script of scheduler calls,
options and a topology), its test bed and op interpreter, the library of fixed scenarios,
and the generated ones (Hypothesis draws a world; :mod:`.codec` writes one as a string).

Pure description and driving: nothing here knows the controlled runtime.
"""
