"""The attack lab: the course's attacks on their own synthetic worlds, for every signed-in caller.

No dataset, budget or ledger of the gateway is involved (see :mod:`dalenius.server.attack_lab`),
so analysts may run it as curators do; sizes are capped and one run at a time is allowed.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from dalenius.server import attack_lab, models
from dalenius.server.models import TEXT_PATTERN
from dalenius.server.routes.deps import CallerDep, errors

router = APIRouter(prefix="/v1", tags=["analyst"])

AttackName = Annotated[str, Path(max_length=40, pattern=TEXT_PATTERN)]


@router.get("/attacks", responses=errors(), operation_id="attacks")
def attacks(caller: CallerDep) -> dict[str, object]:
    """The lab's attacks, the targets each runs against, and each size's default and cap."""
    return attack_lab.catalogue()


@router.post("/attacks/{attack}", responses=errors(400, 409), operation_id="attack")
def attack(attack: AttackName, body: models.AttackRequest, caller: CallerDep) -> dict[str, object]:
    """Run one attack against its targets: success rates with intervals, bounds, and the plot.

    The bound of each report says what it rests on (``bound.guarantee``): differential privacy,
    k-anonymity or ℓ-diversity (syntactic properties, not DP), or a synthetic release. The plot
    is a PNG as a ``data:`` URL. Another run in progress gives 409.
    """
    return attack_lab.run(attack, body)
