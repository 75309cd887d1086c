"""Executions: run a scenario once on the controlled runtime under a strategy and judge it
(:mod:`.execution`, :mod:`.checks`, :mod:`.timing`), repeat it under a strategy
(:mod:`.explorer`) or over generated worlds (:mod:`.simulate`), print its trace, and
register the replay strings that bring one back (:mod:`.reproduce`).
"""
