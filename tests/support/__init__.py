"""Test-only helpers: the seeded random source and the noise-free answer hook."""
