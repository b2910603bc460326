"""The binary tree of a continual release: dyadic intervals of periods, and their combination.

The tree mechanism (Dwork, Naor, Pitassi & Rothblum 2010; Chan, Shi & Song 2011) measures, for a
horizon of ``T`` periods, one noisy value per *dyadic interval*: level 0 has one node per period,
level ``ℓ`` one node per block ``[k·2^ℓ, (k+1)·2^ℓ − 1]`` (cut at ``T − 1``), up to the level
whose single node covers every period: ``L = ⌈log2 T⌉ + 1`` levels. Every period lies in exactly
one node of each level, so a row touches ``L`` nodes.

A node is measured once, when its last period closes. After ``c`` periods have closed the
measured nodes are those ending before ``c``: a forest of complete subtrees. The estimates of the
periods (and so of every running total) are the weighted least-squares combination of the
measured nodes under "children sum to their parent" — Honaker's (2015) efficient use of the tree,
computed per measured subtree by the two-pass estimator hierarchies use
(:func:`~dalenius.releases.hierarchy.tree_least_squares`). Nodes of different subtrees share no
period, so the subtrees are estimated independently. Every node has the same noise, so the
combination's coefficients are public: they depend on ``T`` and ``c`` only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dalenius.releases.hierarchy import tree_least_squares


def full_levels(horizon: int) -> int:
    """``⌈log2 T⌉ + 1``: the levels of the whole tree over ``horizon`` periods."""
    return max(horizon - 1, 0).bit_length() + 1


@dataclass(frozen=True)
class DyadicTree:
    """The dyadic intervals of ``horizon`` periods, level 0 (one node per period) first.

    Node ``i`` covers periods ``start[i] .. end[i]`` (inclusive) at ``level[i]``; ``parent[i]``
    is the node of the next level covering it (``-1`` for the top level). A tree cut to fewer
    levels (``height``) has several top nodes; the combination treats each as a root.

    Example:
        >>> tree = DyadicTree(5)
        >>> tree.levels, len(tree.start)
        (4, 11)
        >>> [(int(s), int(e)) for s, e in zip(tree.start[5:], tree.end[5:])]
        [(0, 1), (2, 3), (4, 4), (0, 3), (4, 4), (0, 4)]
    """

    horizon: int
    height: int | None = None
    """Keep only the lowest ``height`` levels (``None``: all of them, up to one node)."""

    @functools.cached_property
    def levels(self) -> int:
        """The number of nodes each period (and each row) lies in: ``⌈log2 T⌉ + 1`` for the
        whole tree, ``height`` for a cut one (1: one node per period, no tree above).
        """
        return self.height or full_levels(self.horizon)

    @functools.cached_property
    def _layout(self) -> tuple[npt.NDArray[np.int64], ...]:
        starts, ends, levels, parents = [], [], [], []
        offset = 0
        for level in range(self.levels):
            width = 1 << level
            count = -(-self.horizon // width)
            above = offset + count
            for k in range(count):
                starts.append(k * width)
                ends.append(min((k + 1) * width, self.horizon) - 1)
                levels.append(level)
                parents.append(above + k // 2 if level + 1 < self.levels else -1)
            offset = above
        return tuple(np.array(a, dtype=np.int64) for a in (starts, ends, levels, parents))

    @property
    def start(self) -> npt.NDArray[np.int64]:
        """Each node's first period."""
        return self._layout[0]

    @property
    def end(self) -> npt.NDArray[np.int64]:
        """Each node's last period: it is measured when that period closes."""
        return self._layout[1]

    @property
    def level(self) -> npt.NDArray[np.int64]:
        """Each node's level (0: one period)."""
        return self._layout[2]

    @property
    def parent(self) -> npt.NDArray[np.int64]:
        """Each node's parent (``-1`` for the top node)."""
        return self._layout[3]

    @property
    def size(self) -> int:
        """The number of nodes (about ``2T``)."""
        return int(self.start.size)

    def most_nodes_per_period(self) -> int:
        """The most nodes one period lies in, counted from the nodes themselves: a row changes
        at most this many node values (the privacy map's ``L``).
        """
        cover = np.zeros(self.horizon + 1, dtype=np.int64)
        np.add.at(cover, self.start, 1)
        np.add.at(cover, self.end + 1, -1)
        return int(np.cumsum(cover)[: self.horizon].max())

    def measured(self, closed: int) -> npt.NDArray[np.bool_]:
        """Which nodes are measured once ``closed`` periods have closed (their last one has)."""
        return self.end < closed

    def node_values(self, per_period: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Every node's value from the values of the periods (a node sums its periods).

        ``per_period`` may be shorter than the horizon: a node reaching past it sums only the
        periods given (such a node is not measured yet, and its value is not used).
        """
        padded = np.zeros(self.horizon + 1, dtype=np.int64)
        padded[1 : per_period.size + 1] = per_period
        prefix = np.cumsum(padded)
        out: npt.NDArray[np.int64] = (
            prefix[np.minimum(self.end + 1, per_period.size)]
            - prefix[np.minimum(self.start, per_period.size)]
        )
        return out

    def combination(self, closed: int) -> npt.NDArray[np.float64]:
        """``A`` (``closed`` × nodes): period ``p``'s estimate is ``Σ_u A[p, u]·noisy_u``.

        The least-squares combination of the nodes measured once ``closed`` periods have closed,
        all with the same variance (so the weights do not depend on it); unmeasured nodes get 0.
        """
        measured = self.measured(closed)
        out = np.zeros((closed, self.size))
        roots = np.flatnonzero(
            measured & ((self.parent < 0) | ~measured[np.maximum(self.parent, 0)])
        )
        children = self._children()
        for root in roots:
            order = [int(root)]  # breadth first: every parent before its children
            for node in order:
                order.extend(children[node])
            local = {node: i for i, node in enumerate(order)}
            kids = [[local[c] for c in children[node]] for node in order]
            coefficients = tree_least_squares(kids, np.eye(len(order)), np.ones(len(order)))
            leaves = [i for i, node in enumerate(order) if self.level[node] == 0]
            for i in leaves:
                out[int(self.start[order[i]]), order] = coefficients[i]
        return out

    def _children(self) -> list[list[int]]:
        children: list[list[int]] = [[] for _ in range(self.size)]
        for node, par in enumerate(self.parent):
            if par >= 0:
                children[int(par)].append(node)
        return children
