"""Many placements' all-reduces timed in one array pass (hnplan.comm.group_stack.GroupStack) give the tuner's
times of each message on its own placement on floats (hnplan.comm.algorithms.best_time) bit for bit: every
formula and estimate is the one function both go through, its per-placement numbers gathered element by element."""

from dataclasses import replace

import numpy as np
import pytest

from hnplan.comm.algorithms import _fastest, _nccl, best_time, ring_cap_binds
from hnplan.comm.group_stack import GroupStack, MixedBranch, derived, stack_key, when
from hnplan.comm.placement import place_group

SIZES = [64.0, 3.0e3, 1.0e5, 2.0**20 + 1, 3.3e7, 2.0**30]


# (the systems as catalogued, one with IB SHARP switched on, one without NVLS)
SYSTEMS = [
    ("hgx-h100-ib-ndr", {}),
    ("gb200-nvl72", {}),
    ("gb300-nvl72-roce-800g", {}),
    ("dgx-a100-hdr", {}),
    ("dgx-b200-ib-ndr", {"scaleout_in_network_reduction": True}),
    ("hgx-h100-ib-ndr", {"scaleup_in_network_reduction": False}),
]


@pytest.mark.parametrize("system, changes", SYSTEMS)
def test_a_stack_gives_each_placement_its_own_times(cat, system, changes):
    design = cat.design(cat.system(system).model_copy(update=changes))
    gpus = 144 * 72
    placed = {place_group(design, p, st, gpus) for p in (2, 3, 4, 8, 16, 24, 64, 72, 128, 144) for st in (1, 8, 72)}
    stacks: dict = {}
    for g in placed:
        if g.size > 1 and _nccl(g):
            stacks.setdefault(stack_key(g, derived(g, "ring_ll128_cap_binds", ring_cap_binds)), []).append(g)
    assert len(stacks) >= 2 and max(map(len, stacks.values())) >= 3
    for groups in stacks.values():
        at = np.repeat(np.arange(len(groups)), len(SIZES))
        s = np.tile(SIZES, len(groups))
        times = _fastest("allreduce", s, GroupStack([replace(g) for g in groups], at))
        alone = [best_time("allreduce", x, groups[i])[0] for x, i in zip(s.tolist(), at.tolist())]
        assert times.tolist() == alone


def test_a_branch_the_elements_take_differently_is_refused():
    assert when(True) is True and when(np.array([False, False])) is False
    with pytest.raises(MixedBranch):
        when(np.array([True, False]))
