"""Fake sglang."""
__version__ = "0.5.7+fake"
