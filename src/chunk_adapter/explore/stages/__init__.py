"""The explorer's ``chunk-adapter verify`` stages: ``explore`` (the library's scenarios,
seeded runs then proofs: :mod:`.explore`, :mod:`.proofs`) and ``simulate`` (generated
worlds: :mod:`.simulate`); each confirms a failure and calibrates it on the reference adapter.
"""
