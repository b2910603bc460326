"""L4½: the attack lab — runnable, measured attacks against a raw database, a naive noisy system and Dalenius.

Each attack module holds one attack, its success metric and the bound DP puts on it. Attacks see
data only through :mod:`dalenius.attacks.targets` (an import-linter contract enforces it);
:mod:`dalenius.attacks.population` writes seeded experiment data and keeps the truth for scoring;
:mod:`dalenius.attacks.report` prints success rates with exact binomial intervals.
"""
