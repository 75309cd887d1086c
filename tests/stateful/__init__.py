"""The Hypothesis state machines and the pipeline adapters they check."""
