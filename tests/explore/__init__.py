"""The interleaving explorer."""
