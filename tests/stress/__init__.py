"""The stress scenarios."""
