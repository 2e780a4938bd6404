"""One options object for a pass's operator rows: the table, its columns, the batch grid and the roofline answer
read the same :class:`OperatorOptions`, given whole or field by field as keywords."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from hnplan.catalog.schemas import StackChoices
from hnplan.compute.operator_grid import operator_grid
from hnplan.compute.operators import OperatorOptions, operator_columns, operator_options, operator_table, table_attrs
from hnplan.planning.roofline import roofline_answer

KW = dict(kv_len=2048, tp=8, ep=1, dtype="fp8", recompute="none", attention="flash", sequence_parallel=False)


def test_the_defaults_are_the_documented_ones():
    assert dataclasses.asdict(OperatorOptions()) == dict(
        kv_len=None,
        tp=1,
        cp=1,
        ep=1,
        dtype="bf16",
        recompute="none",
        convention="executed",
        attention="flash",
        sequence_parallel=True,
        stack=None,
    )


def test_options_are_frozen_and_keywords_replace_fields():
    base = OperatorOptions(tp=8, dtype="fp8")
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.tp = 2  # type: ignore[misc]
    assert operator_options(base, tp=2) == OperatorOptions(tp=2, dtype="fp8")
    assert base.tp == 8  # the given object is not changed
    assert operator_options(base) is base
    assert operator_options(None, cp=2) == OperatorOptions(cp=2)
    with pytest.raises(TypeError, match="tensor_parallel"):
        operator_options(None, tensor_parallel=8)


def test_the_table_with_an_options_object_is_the_table_with_keywords(cat):
    """Llama 3.1 70B decode of 32 sequences at TP8: the LM head is ``2 b (vocab / 8) hidden`` FLOPs
    (2 x 32 x 128,256 / 8 x 8,192) either way, and every number and input is the same."""
    m, acc = cat.model("llama3.1-70b"), cat.accelerator("h100-sxm")
    by_kw = operator_table(m, acc, "decode", 32, 1, **KW)
    by_obj = operator_table(m, acc, "decode", 32, 1, OperatorOptions(**KW))
    pd.testing.assert_frame_equal(by_kw, by_obj)
    assert by_kw.attrs == by_obj.attrs
    head = by_obj.set_index("name").loc["lm_head", "flops"]
    assert head == 2.0 * 32 * 128256 / 8 * 8192
    # an options object with a keyword on top: the keyword wins
    mixed = operator_table(m, acc, "decode", 32, 1, OperatorOptions(**KW | dict(tp=2)), tp=8)
    pd.testing.assert_frame_equal(mixed, by_kw)
    assert table_attrs(m, acc, "decode", 32, 1, OperatorOptions(**KW)) == {
        k: v for k, v in by_kw.attrs.items() if k != "units"
    }
    assert table_attrs(m, acc, "prefill", 1, 4096)["kv_len"] == 4096  # kv_len None: the sequence length


def test_columns_and_grid_take_the_options_object(cat):
    m, acc = cat.model("deepseek-v3"), cat.accelerator("h100-sxm")
    opts = OperatorOptions(kv_len=2176, ep=8, stack=StackChoices())
    cols = operator_columns(m, acc, "decode", 64, 2176, opts)
    assert {k: v.tolist() for k, v in cols.items()} == {
        k: v.tolist() for k, v in operator_columns(m, acc, "decode", 64, 2176, **dataclasses.asdict(opts)).items()
    }
    grid = operator_grid(m, acc, "decode", [1, 64], 2176, opts)
    np.testing.assert_array_equal(grid["time_s"][:, 1], cols["time_s"])


def test_the_roofline_answer_takes_the_options_object_and_a_stack_id(cat):
    opts = OperatorOptions(tp=2, dtype="fp8", recompute="selective")
    by_obj = roofline_answer("llama3.1-8b", "h100-sxm", "train", 1, 4096, opts, catalog=cat, stack="megatron-core")
    kw = dict(tp=2, dtype="fp8", recompute="selective")
    by_kw = roofline_answer("llama3.1-8b", "h100-sxm", "train", 1, 4096, catalog=cat, stack="megatron-core", **kw)
    assert by_obj == by_kw
    assert (by_obj["tp"], by_obj["dtype"], by_obj["recompute"], by_obj["kv_len"]) == (2, "fp8", "selective", 4096)
