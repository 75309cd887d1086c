"""Fast tests of the reference adapter, the oracles and the helpers under every driver."""
