"""A pinned knob's defaults are not computed (hnplan.planning.training.candidates._axis takes them as a function):
pinning a knob to a value its defaults hold must give exactly the unpinned candidates with that value, in the same
order, for the axes whose defaults became lazy (tp, cp, pp, ep)."""

from __future__ import annotations

import numpy as np
import pytest

from hnplan.catalog import load_catalog
from hnplan.planning.training.candidates import PLAN_FIELDS, candidate_columns


def _rows(cols, modes):
    rec = np.asarray(modes, dtype=object)[cols["recompute"]]
    return [
        tuple(rec[i] if f == "recompute" else int(cols[f][i]) for f in (*PLAN_FIELDS, "num_microbatches"))
        for i in range(len(cols["tp"]))
    ]


@pytest.mark.parametrize(
    ("model", "system", "gpus", "knob", "value"),
    [
        ("llama3.1-70b", "hgx-h100-ib-ndr", 64, "tp", 8),
        ("llama3.1-70b", "hgx-h100-ib-ndr", 64, "pp", 4),
        ("llama3.1-70b", "hgx-h100-ib-ndr", 64, "cp", 2),
        ("deepseek-v3", "gb200-nvl72", 256, "ep", 64),
    ],
)
def test_pinning_a_knob_keeps_the_unpinned_candidates_with_that_value(model, system, gpus, knob, value):
    cat = load_catalog()
    m, s = cat.model(model), cat.system(system)
    free_cols, free_modes = candidate_columns(m, s, gpus, 8192, 2 * gpus)
    pinned_cols, pinned_modes = candidate_columns(m, s, gpus, 8192, 2 * gpus, {knob: value})
    free, pinned = _rows(free_cols, free_modes), _rows(pinned_cols, pinned_modes)
    i = list((*PLAN_FIELDS, "num_microbatches")).index(knob)
    want = [r for r in free if r[i] == value]
    assert len(want) > 10  # the value is among the defaults: a real subset, not an empty one
    assert pinned == want


def test_evaluator_reads_the_recompute_codes_of_the_frame_it_was_given():
    # the codes kept for the column candidate_frame built are its own; a changed column is matched anew
    from hnplan.planning.training.candidates import candidate_frame, recompute_codes
    from hnplan.planning.training.evaluate import _mode_codes

    cat = load_catalog()
    df = candidate_frame(cat.model("llama3.1-8b"), cat.system("hgx-h100-ib-ndr"), 8, 4096, 64)
    kept = recompute_codes(df["recompute"].array.__arrow_array__())
    assert kept is not None and not kept.flags.writeable
    assert [("none", "selective", "full")[i] for i in kept] == df["recompute"].tolist()
    changed = df["recompute"].copy()
    changed.iloc[0] = "full" if changed.iloc[0] != "full" else "none"
    assert recompute_codes(changed.array.__arrow_array__()) is None
    codes, modes = _mode_codes(changed)
    assert list(modes[codes]) == changed.tolist()
