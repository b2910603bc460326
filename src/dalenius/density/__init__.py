"""density."""
