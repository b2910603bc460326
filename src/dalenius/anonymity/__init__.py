"""anonymity."""
