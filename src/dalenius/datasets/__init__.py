"""L4: synthetic datasets that Dalenius generates itself, for the demo and the benchmarks.

Everything here is entirely synthetic (no real person) and deterministic given a seed, so the demo
runs on a fresh machine without downloads and the benchmarks are reproducible.
"""

from dalenius.datasets.census import generate_people, generate_visits, write_benchmark, write_demo

__all__ = ["generate_people", "generate_visits", "write_benchmark", "write_demo"]
