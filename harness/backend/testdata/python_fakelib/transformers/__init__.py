"""Fake transformers that is not there: the drivers must run without it (and
a real one on the test machine must not be used: it may try the network)."""
raise ImportError("transformers is not installed (fake)")
