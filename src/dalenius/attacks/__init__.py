"""L4½: the attack lab — runnable, measured attacks against a raw database, a naive noisy system and Dalenius.

Each attack module holds one attack, its success metric and the bound DP puts on it. Attacks see
data only through :mod:`dalenius.attacks.targets` (an import-linter contract enforces it);
:mod:`dalenius.attacks.population` writes seeded experiment data and keeps the truth for scoring;
:mod:`dalenius.attacks.report` prints success rates with exact binomial intervals.

Attacks on released microdata see a published file instead of a query interface:
:mod:`dalenius.attacks.published` builds the releases a custodian might publish (names dropped,
k-anonymous, ℓ-diverse, t-close, Dalenius synthetic rows), :mod:`dalenius.attacks.voters` draws
the attacker's voter roll, and :mod:`dalenius.attacks.linking` (Sweeney's re-identification) and
:mod:`dalenius.attacks.homogeneity` (homogeneity and background knowledge, the course's Bob and
Umeko) attack them through :mod:`dalenius.attacks.matching`.
"""
