"""The controlled runtime: the tasks, their carriers (greenlets or threads), the controller
that runs one task at a time on a virtual clock, the primitives, queues and connector
wrappers whose calls are its switch points, and what each step touched (DPOR's footprints).

It knows nothing of scenarios, strategies or checks: a strategy reaches it only through
the controller's ``Scheduler`` calls.
"""
