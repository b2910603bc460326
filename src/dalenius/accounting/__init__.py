"""L1 accounting: composition, conversions and budget arithmetic over exact rational losses.

This layer is pure math with no storage: the ledger (L3) stores charges and calls these functions
to add them up under the dataset's definition and to compare the total with a cap. Every result
that involves an irrational number (a square root, a logarithm, an exponential) is bounded with
rationals on the safe side: up for what is spent, down for what remains.
"""

from dalenius.accounting.advanced import advanced_composition, best_composition
from dalenius.accounting.compose import (
    Shortfall,
    components,
    compose,
    compose_counted,
    fits,
    leq,
    minimum,
    parallel,
    remaining,
    shortfall,
)
from dalenius.accounting.convert import (
    approx_to_zcdp_cap,
    cap_as,
    convert,
    pure_to_zcdp,
    zcdp_to_approx,
)
from dalenius.accounting.definitions import (
    DEFINITIONS,
    Definition,
    definition_of,
    parse_definition,
    zero_loss,
)
from dalenius.accounting.renyi import rho_for_approx, zcdp_to_approx_tight

__all__ = [
    "DEFINITIONS",
    "Definition",
    "Shortfall",
    "advanced_composition",
    "approx_to_zcdp_cap",
    "best_composition",
    "cap_as",
    "components",
    "compose",
    "compose_counted",
    "convert",
    "definition_of",
    "fits",
    "leq",
    "minimum",
    "parallel",
    "parse_definition",
    "pure_to_zcdp",
    "remaining",
    "rho_for_approx",
    "shortfall",
    "zcdp_to_approx",
    "zcdp_to_approx_tight",
    "zero_loss",
]
