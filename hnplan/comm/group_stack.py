"""Many placements' messages timed in one array pass: a :class:`GroupStack` stands for a placement whose numbers
(ranks, ranks per domain, domains, the numbers :mod:`hnplan.comm.algorithm_times` derives from them) are arrays
over the elements ``(placement, message size)``, so the all-reduce and all-gather / reduce-scatter formulas of
:mod:`hnplan.comm.algorithm_times` and the tuner's estimates of :mod:`hnplan.comm.nccl_bw` run once over every
element; the formulas are the same functions the single placement goes through (no second copy).

A stack holds placements whose formulas take the same branches (:func:`stack_key`): the same links, one domain or
several, a channel count or none, the ring's LL128 channel cap binding or not. Each branch on a stack's numbers
goes through :func:`when`, which raises :class:`MixedBranch` where its elements disagree (the caller then times
those placements one by one), or :func:`pick`, which takes it element by element (the in-network all-reduce with
one rank per domain, in a stack with more; PAT, with one rank per domain only, where the stack's elements with more
take the ring).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from hnplan.comm.placement import GroupPlacement


class MixedBranch(Exception):
    """A branch of a formula that the elements of a :class:`GroupStack` take differently."""


def when(cond, mixed: bool = False) -> bool:
    """A branch on a placement's numbers: ``cond`` itself for one placement (a bool); for a stack (an array of
    bools), the branch all its elements take (``mixed``: whether any takes it, for a caller that goes on element
    by element, :func:`pick`).

    Raises
    ------
    MixedBranch
        Where the elements of a stack disagree (unless ``mixed``).
    """
    if cond.__class__ is bool:
        return cond
    n = np.count_nonzero(cond)  # (the cheapest of numpy's reductions on a few elements)
    if n and n != np.size(cond) and not mixed:
        raise MixedBranch
    return bool(n)


def pick(cond, yes, no):
    """``yes`` where ``cond``, else ``no``: one placement's branch (``cond`` a bool), a stack's element by
    element (both computed)."""
    if cond.__class__ is bool:
        return yes if cond else no
    return np.where(cond, yes, no)


def derived(g, key, make: Callable, *args):
    """``make(g, *args)``: numbers of placement ``g`` that depend on it alone, kept in ``g.derived[key]`` (once
    per placement, many sizes are timed on one); for a :class:`GroupStack`, each of its placements' numbers,
    element by element (:meth:`GroupStack.gather`)."""
    terms = g.derived.get(key)
    if terms is None:
        terms = g.derived[key] = g.gather(key, make, args) if g.__class__ is GroupStack else make(g, *args)
    return terms


def _column(values: list, at: np.ndarray):
    """The values of the placements at elements ``at``: the one value where they agree (a number or None),
    else an array; a tuple of columns for tuples (of numbers: gathered as one table)."""
    first = values[0]
    if first.__class__ is tuple:
        if not any(v.__class__ is tuple for v in first):
            table = np.array(values)
            if table.dtype != object:
                return tuple(table.T.take(at, axis=1))
        return tuple(_column(list(col), at) for col in zip(*values))
    if values.count(first) == len(values):
        return first
    column = np.array(values)
    if column.dtype == object:
        raise MixedBranch  # a cap some placements have and others not: not one branch
    return column.take(at)


class GroupStack:
    """Placements ``groups`` at elements ``at`` (the placement of each element, an index into ``groups``), as
    one placement whose numbers are arrays over the elements (or one number where all agree).

    Attributes
    ----------
    size, per_domain, domains : int or numpy.ndarray of int
        p, q and D of each element's placement.
    up, out : LinkParams
        The links, the same for every placement of a stack (:func:`stack_key`).
    derived : dict
        The placements' derived numbers gathered element by element (:func:`derived`).
    """

    def __init__(self, groups: Sequence[GroupPlacement], at: np.ndarray) -> None:
        self.groups, self.at = groups, at
        self.size = _column([g.size for g in groups], at)
        self.per_domain = _column([g.per_domain for g in groups], at)
        self.domains = _column([g.domains for g in groups], at)
        self.up, self.out = groups[0].up, groups[0].out
        self.derived: dict = {}

    def gather(self, key, make: Callable, args: tuple):
        """``make(g, *args)`` of each placement (kept on it, :func:`derived`) at each element."""
        values = []
        for g in self.groups:
            v = g.derived.get(key)
            if v is None:
                v = g.derived[key] = make(g, *args)
            values.append(v)
        return _column(values, self.at)


def stack_key(g: GroupPlacement, binds: bool) -> tuple:
    """What decides the branches the all-reduce formulas and the tuner's estimates take on ``g``: its links,
    whether it spans domains, whether it has a channel count, and ``binds`` (the ring's LL128 channel cap binds). Placements with equal keys stack (links by identity: hashing
    their fields costs more than a stack saves; the placements of one system share them)."""
    return (id(g.up), id(g.out), g.domains == 1, g.channels is None, binds)
