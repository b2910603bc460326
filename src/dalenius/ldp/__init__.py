"""Local differential privacy: each client randomises its own report before it leaves the device.

Frequency oracles in the pure-protocol framework (:mod:`~dalenius.ldp.grr`,
:mod:`~dalenius.ldp.unary`, :mod:`~dalenius.ldp.hashing`, :mod:`~dalenius.ldp.hadamard`) with a
helper that picks one (:mod:`~dalenius.ldp.choose`). Clients draw their randomness from the
operating system's generator only (:mod:`~dalenius.ldp._draws`).
"""

from dalenius.ldp._base import FrequencyEstimate, FrequencyOracle
from dalenius.ldp.choose import FACTORIES, best_oracle, make_oracle
from dalenius.ldp.grr import GeneralizedRR
from dalenius.ldp.hadamard import HadamardResponse
from dalenius.ldp.hashing import LocalHashing
from dalenius.ldp.unary import UnaryEncoding

__all__ = [
    "FACTORIES",
    "FrequencyEstimate",
    "FrequencyOracle",
    "GeneralizedRR",
    "HadamardResponse",
    "LocalHashing",
    "UnaryEncoding",
    "best_oracle",
    "make_oracle",
]
