"""A correct ChunkAdapter as an abstract base (base.py) and a concrete subclass (impl.py)."""

from .impl import KVChunkAdapter, make

__all__ = ["KVChunkAdapter", "make"]
