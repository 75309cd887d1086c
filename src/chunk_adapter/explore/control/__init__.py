"""Taking control of an adapter's threads: decide white-box or substitution by one
discovery build (:mod:`.plan`), patch the standard library's threading while the
explorer runs (:mod:`.patches`), and rebind the adapter's modules' names to the
routed classes (:mod:`.substitute`); :mod:`.keywords` is what the factory's signature
says, read once per run.
"""
