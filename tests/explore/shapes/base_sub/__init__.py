"""Shape: a base class (sender, threads) and a subclass (receiver) in two modules.

The factory is the subclass itself: ``tests.explore.shapes.base_sub.sub:Adapter``.
"""
