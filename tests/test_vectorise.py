"""The planners' vectorisation helpers: a Columns table and a DataFrame give the same distinct rows and
the same gathered results; caches (per-table sub-keys, per-job collectives and activations, per-call
memo) change no number."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hnplan.compute.layout import stage_layers
from hnplan.planning.training import candidate_frame, evaluate_plans, make_job
from hnplan.vectorise import (
    _RUN_ROWS,
    Columns,
    _distinct,
    column,
    distinct_values,
    factorize,
    factorize_ints,
    frame_of,
    gather,
    memo,
    on_distinct,
)

MODES = np.array(["none", "selective", "full"], dtype=object)


def _table(a, b, r):
    df = pd.DataFrame(dict(a=a, b=b, recompute=MODES[r]))
    cols = Columns(dict(a=np.asarray(a), b=np.asarray(b)), {"recompute": (np.asarray(r), MODES)})
    return df, cols


rows = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-3, 40), min_size=n, max_size=n),
        st.lists(st.sampled_from([1, 2, 4, 8, 4096]), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


@settings(max_examples=60, deadline=None)
@given(rows)
def test_columns_and_frames_give_the_same_distinct_rows(data):
    df, cols = _table(*data)
    for keys in (["a"], ["a", "b"], ["b", "recompute"], ["a", "b", "recompute"]):
        for table in (df, cols):
            codes, uniq = factorize(table, keys)
            # each row's distinct tuple is the row's own values, and the tuples are distinct
            for k in keys:
                assert column(uniq, k)[codes].tolist() == column(df, k).tolist()
            assert len(set(zip(*(column(uniq, k).tolist() for k in keys)))) == len(uniq)


@settings(max_examples=40, deadline=None)
@given(rows)
def test_on_distinct_equals_the_function_on_every_row(data):
    df, cols = _table(*data)

    def fn(u):  # element-wise in its columns
        return (column(u, "a") * 10.0 + column(u, "b"), np.where(column(u, "recompute") == "full", 1.0, 0.5))

    want = fn(df)
    for table in (df, cols):
        for got, ref in zip(on_distinct(table, ["a", "b", "recompute"], fn), want):
            assert np.array_equal(got, ref)
    cols.factorize(["a", "b", "recompute"])  # a wider key set cached first: the narrower ones go through it
    codes, uniq = cols.factorize(["b", "a"])
    assert column(uniq, "a")[codes].tolist() == list(data[0])
    assert column(uniq, "b")[codes].tolist() == list(data[1])


def test_columns_behave_as_a_small_frame():
    _, cols = _table([3, 1, 3], [1, 1, 2], [0, 2, 2])
    assert len(cols) == 3 and list(cols) == ["a", "b", "recompute"] and "recompute" in cols
    assert cols["recompute"].tolist() == ["none", "full", "full"]
    assert distinct_values(cols, "recompute") == ["none", "full"]
    assert cols.frame().to_dict("list") == dict(a=[3, 1, 3], b=[1, 1, 2], recompute=["none", "full", "full"])
    with pytest.raises(ValueError, match="unequal lengths"):
        Columns(dict(a=np.arange(2), b=np.arange(3)))


def test_memo_calls_once_per_key_and_keeps_a_cache():
    df, cols = _table([1, 2, 1, 1], [4, 4, 4, 8], [0, 0, 0, 1])
    calls = []

    def fn(a, b):
        calls.append((a, b))
        return {"x": a * b / 2}

    cache: dict = {}
    out = memo(cols, ["a", "b"], fn, cache)
    assert out["x"].tolist() == [2.0, 4.0, 2.0, 4.0] and len(calls) == 3
    again = memo(df, ["a", "b"], fn, cache)  # every key seen: fn not called again
    assert again["x"].tolist() == [2.0, 4.0, 2.0, 4.0] and len(calls) == 3


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 130), st.lists(st.integers(1, 140), min_size=1, max_size=300))
def test_stage_split_by_table_equals_the_division(layers, pp):
    class M:
        pass

    m = M()
    m.layers = layers
    got = stage_layers(m, np.array(pp))
    for i, p in enumerate(pp):
        one = stage_layers(m, p)
        assert (got.per_stage[i], got.last[i], got.empty[i]) == (one.per_stage, one.last, one.empty)


def test_warm_and_partial_searches_give_the_cold_numbers(cat):
    """The caches a job keeps (collective times, activation values) and the part times memoised on the
    Design: a search after a partial one, a repeated one and one on a job with other links give the
    numbers of a fresh evaluation."""
    args = ("mixtral-8x7b", "hgx-h100-ib-ndr", 64, 4096, 256)
    job = make_job(*args, catalog=cat)
    cands = candidate_frame(job.model, job.system, *args[2:])
    part = evaluate_plans(job, cands.iloc[::7])
    full = evaluate_plans(job, cands)
    again = evaluate_plans(job, cands)
    fresh = evaluate_plans(make_job(*args, catalog=cat), cands)
    pd.testing.assert_frame_equal(full, again)
    pd.testing.assert_frame_equal(full, fresh)
    pd.testing.assert_frame_equal(part, full.iloc[::7].reset_index(drop=True))
    # a job with slower links starts with empty caches: its DP exposure grows
    lk = job.links
    slow = replace(job, links=replace(lk, scaleout=replace(lk.scaleout, bw_Bps=lk.scaleout.bw_Bps / 4)), _groups={})
    assert not slow.memo
    dp = evaluate_plans(slow, cands)["t_dp_comm_exposed_s"]
    assert (dp >= full["t_dp_comm_exposed_s"]).all() and (dp > full["t_dp_comm_exposed_s"]).any()


@pytest.mark.parametrize(
    "args",
    [
        ("llama3.1-405b", "hgx-h100-ib-ndr", 16384, 8192, 2048),  # the planner benchmark's dense search
        ("deepseek-v3", "hgx-h800-ib", 256, 4096, 1920),  # MoE: expert all-to-alls, expert-DP collectives
    ],
)
def test_cold_search_equals_the_warm_one_exactly(cat, args):
    """A search on a fresh catalog (no part times on its Design, no collective times on its job) gives bit for
    bit the numbers of the same search repeated on a warm job, and the same ranking."""
    from hnplan.catalog import Catalog
    from hnplan.planning.training import rank_plans

    fresh = Catalog()
    job = make_job(*args, catalog=fresh)
    cands = candidate_frame(job.model, job.system, *args[2:])
    cold = evaluate_plans(job, cands)
    warm = evaluate_plans(job, cands)
    pd.testing.assert_frame_equal(cold, warm, check_exact=True)
    pd.testing.assert_frame_equal(cold, evaluate_plans(make_job(*args, catalog=cat), cands), check_exact=True)
    ranked_cold = rank_plans(make_job(*args, catalog=Catalog()))
    pd.testing.assert_frame_equal(ranked_cold, rank_plans(job), check_exact=True)


def test_distinct_tuples_beyond_one_int64():
    from hnplan.vectorise import _distinct

    codes = [np.array([5, 1, 5, 1]), np.array([7, 2, 7, 3])]
    out, idx = _distinct(codes, [2**40, 2**40], 4)  # 2^80 possible tuples: paired by hashing instead
    assert out.tolist() == [0, 1, 0, 2]
    assert [c.tolist() for c in idx] == [[5, 1, 1], [7, 2, 3]]


@pytest.mark.parametrize(
    "model, gpus, seq, batch, fixed, zwp",
    [
        ("llama3.1-8b", 16, 4096, 64, {}, False),
        ("llama3.1-8b", 16, 4096, 64, {}, True),
        ("mixtral-8x7b", 64, 4096, 256, {"dp": 8}, False),
    ],
)
def test_candidates_are_the_product_that_obeys_the_rules(cat, model, gpus, seq, batch, fixed, zwp):
    """The generator (rules checked before the product with ZeRO and recompute) gives the rows, in the
    order, of the whole product filtered by the rules: TP slowest, recompute fastest."""
    from itertools import product

    from hnplan.compute import RECOMPUTE_MODES
    from hnplan.planning.training import divisors, valid_mask
    from hnplan.planning.training.candidates import MAX_CP, MICROBATCH_SIZES, VIRTUAL_STAGES
    from hnplan.planning.training.plan import PLAN_FIELDS, ZERO_STAGES

    m, s = cat.model(model), cat.system("hgx-h100-ib-ndr")
    d = divisors(gpus).tolist()
    eps = [e for e in divisors(m.moe.experts).tolist() if gpus % e == 0] if m.moe else [1]
    rows = []
    # expert tensor parallelism: etp = tp (Megatron-Core's default), then, for an MoE model at tp > 1, etp = 1
    for tp, cp, pp, ep, folded, mb, v, z, rc in product(
        [t for t in d if t <= s.scaleup_domain_gpus],
        [c for c in d if c <= MAX_CP and c & (c - 1) == 0],
        [p for p in d if p <= m.layers],
        eps,
        [False, True] if m.moe else [False],
        MICROBATCH_SIZES,
        VIRTUAL_STAGES,
        ZERO_STAGES,
        RECOMPUTE_MODES,
    ):
        if gpus % (tp * cp * pp) or (not zwp and z > 1 and pp > 1) or (folded and tp == 1):
            continue
        dp = gpus // (tp * cp * pp)
        if "dp" in fixed and dp != fixed["dp"]:
            continue
        etp = 1 if folded else tp
        rows.append(
            dict(
                tp=tp,
                pp=pp,
                dp=dp,
                cp=cp,
                ep=ep,
                microbatch_size=mb,
                virtual_stages=v,
                zero_stage=z,
                recompute=rc,
                etp=etp,
            )
        )
    ref = pd.DataFrame(rows)
    ref = ref[valid_mask({k: ref[k].to_numpy() for k in ref}, m, gpus, seq, batch)].reset_index(drop=True)
    got = candidate_frame(m, s, gpus, seq, batch, fixed, zero_with_pipeline=zwp)
    assert len(got) == len(ref) > 0
    pd.testing.assert_frame_equal(got[list(PLAN_FIELDS)], ref[list(PLAN_FIELDS)], check_dtype=False)
    assert (got["num_microbatches"] == batch // (got["dp"] * got["microbatch_size"])).all()


def test_memo_batched_equals_memo_and_fills_the_cache():
    """Batched over the non-``by`` keys, the results equal the one-tuple memo's, and a second call reads
    the cache only."""
    from hnplan.vectorise import memo, memo_batched

    df = pd.DataFrame({"a": [1, 2, 1, 3, 2], "b": [4, 4, 5, 4, 4], "c": ["x", "y", "x", "x", "y"]})

    def one(a, b, c):
        return {"f": a * 1.5 / b + (c == "x"), "g": 2.0}

    def batched(a, b, c):
        return {"f": np.asarray(a) * 1.5 / b + (c == "x"), "g": 2.0}

    cache: dict = {}
    got = memo_batched(df, ["a", "b", "c"], batched, cache, by=("b", "c"))
    want = memo(df, ["a", "b", "c"], one)
    pd.testing.assert_frame_equal(got, want)
    assert len(cache) == 4
    again = memo_batched(df, ["a", "b", "c"], lambda *a: 1 / 0, cache, by=("b", "c"))
    pd.testing.assert_frame_equal(again, want)


def test_frame_of_is_the_constructors_frame():
    """The result table from its blocks: the same columns, dtypes, values and index as pandas' constructor
    (numbers repeated over the rows), and a column of another kind through the constructor itself."""
    cols = dict(
        tp=np.array([1, 2, 4]),
        t_s=np.array([0.5, 0.25, 0.125]),
        fits=np.array([True, False, True]),
        recompute=pd.array(["none", "full", "none"], dtype=pd.StringDtype(na_value=np.nan)),
        gpus=8,
    )
    want = pd.DataFrame({k: np.full(3, x) if np.ndim(x) == 0 else x for k, x in cols.items()}, copy=False)
    got = frame_of(cols, 3)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got.columns.dtype == want.columns.dtype and isinstance(got.index, pd.RangeIndex)
    assert np.shares_memory(got["t_s"].to_numpy(), cols["t_s"])  # kept as it is, as copy=False keeps it
    mixed = frame_of(dict(a=np.array(["x", "y"], dtype=object), b=np.array([1.0, 2.0])), 2)
    pd.testing.assert_frame_equal(mixed, pd.DataFrame(dict(a=["x", "y"], b=[1.0, 2.0])))
    assert frame_of({k: np.zeros(0) for k in ("a", "b")}, 0).shape == (0, 2)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda k: st.lists(
            st.lists(st.sampled_from([0.0, 1.0, 2.0, 2.5, np.nan]), min_size=k, max_size=k), min_size=0, max_size=40
        )
    )
)
def test_slowest_stage_pick_is_numpys_arg_max(rows):
    """The slowest stage of each candidate is ``np.argmax`` down the [stage, candidate] array (the earlier stage
    on a tie, the first NaN where there is one) and its time is that stage's."""
    from hnplan.planning.training.slowest import _slowest

    k = len(rows[0]) if rows else 2
    both = np.array(rows, dtype=float).reshape(-1, k).T  # [stage, candidate]
    stage, t = _slowest(list(both))
    want = np.argmax(both, axis=0)
    assert np.array_equal(stage, want)
    assert np.array_equal(t, both[want, np.arange(both.shape[1])], equal_nan=True)


@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=60),
    st.sampled_from([np.int64, np.int32, np.uint16]),
)
def test_factorize_ints_by_sort_is_pandas_factorize(values, dtype):
    # a process without pandas factorizes integers by a sort: the codes and values of pandas' hash table
    a = np.array(values, dtype=np.int64).astype(dtype)  # wrapped into the narrower types on purpose
    want_codes, want_uniq = pd.factorize(a, sort=False)
    for by_sort in (True, False):
        codes, uniq = factorize_ints(a, by_sort=by_sort)
        assert codes.tolist() == want_codes.tolist() and uniq.tolist() == want_uniq.tolist()
        assert uniq.dtype == a.dtype


def test_wide_keys_without_pandas_give_the_same_search(cat, monkeypatch):
    """A search whose distinct key tuples outnumber the lookup table's reach (the data-parallel layouts of
    Llama 3.1 405B's pruned search on 16,384 H100 or 8,192 GB200 GPUs) finds the same plans, every number
    equal, whether its integers are factorized by pandas or by a sort (as a process without pandas does)."""
    import hnplan.vectorise_codes as vec  # the factorisation lives there (hnplan.vectorise re-exports it)
    from hnplan.planning.training import search_best

    real = vec.factorize_ints
    for system, gpus in (("hgx-h100-ib-ndr", 16384), ("gb200-nvl72", 8192)):
        ways = {}
        for by_sort in (False, True):
            calls = []
            monkeypatch.setattr(vec, "factorize_ints", lambda a, b=None, s=by_sort, n=calls: n.append(1) or real(a, s))
            job = make_job("llama3.1-405b", system, gpus, 8192, 2048, "bf16", cat)  # a fresh job: no memo
            ways[by_sort] = search_best(job, top=3)
            assert calls  # the wide-key path ran
        assert ways[True] == ways[False]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["full", "selective", "none", "attention"]), min_size=1, max_size=40), st.booleans())
def test_names_and_flags_factorised_by_a_sort_are_pandas_factorize(values, as_flags):
    """:func:`hnplan.vectorise._sorted_codes` gives ``pandas.factorize(a, sort=False)``'s codes (order of first
    appearance) and values, dtype included, for object, str and bool arrays; a missing value is left to pandas."""
    from hnplan.vectorise import _sorted_codes

    arrays = (
        [np.array([v == "full" for v in values])] if as_flags else [np.array(values, dtype=object), np.array(values)]
    )
    for a in arrays:
        codes, uniq = _sorted_codes(a)
        want_codes, want_uniq = pd.factorize(a, sort=False)
        assert codes.tolist() == want_codes.tolist() and codes.dtype == want_codes.dtype
        assert uniq.tolist() == list(want_uniq) and uniq.dtype == np.asarray(want_uniq).dtype
    assert _sorted_codes(np.array(["full", None], dtype=object)) is None


@settings(max_examples=60, deadline=None)
@given(rows, st.data())
def test_a_flag_added_to_columns_factorises_as_a_plain_column(data, draw):
    """:meth:`Columns.with_flag`: the flag's codes and values are ``pandas.factorize``'s (first appearance, bool),
    the factorisation of any key set with it is the one of a table built with the flag as a plain column, row for
    row (the distinct tuples in any order), and the table it came from keeps its columns and the codes found for
    ``coded``."""
    df, cols = _table(*data)
    flags = np.array(draw.draw(st.lists(st.booleans(), min_size=len(df), max_size=len(df))))
    cols.codes("b")  # codes found before: carried over
    flagged = cols.with_flag("f", flags, coded=("a", "recompute"))
    assert "a" in cols._codes and "f" not in cols and "f" not in cols._codes
    plain = Columns({"a": cols["a"], "b": cols["b"], "recompute": cols["recompute"], "f": flags})
    codes, values = flagged.codes("f")
    want_codes, want_values = pd.factorize(flags, sort=False)
    assert codes.tolist() == want_codes.tolist() and values.tolist() == list(want_values) and values.dtype == bool
    for keys in (["f"], ["a", "f"], ["a", "b", "recompute", "f"]):
        got, uniq = flagged.factorize(keys)
        want, want_uniq = plain.factorize(keys)
        rows_got = list(zip(*(uniq[k][got].tolist() for k in keys)))
        assert rows_got == list(zip(*(want_uniq[k][want].tolist() for k in keys)))
        assert len(uniq) == len(want_uniq) and uniq["f"].dtype == bool
    with pytest.raises(ValueError):
        cols.with_flag("f", flags[:-1])


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8, 11])
def test_gather_equals_one_take_per_array(k):
    # row i of the result is arrays[j][codes[i]]: by hand for array j = 10 j + row
    arrays = [10.0 * j + np.arange(5.0) for j in range(k)]
    codes = np.array([4, 0, 0, 2])
    got = gather(arrays, codes)
    assert [g.tolist() for g in got] == [[10.0 * j + 4, 10.0 * j, 10.0 * j, 10.0 * j + 2] for j in range(k)]
    assert all(g.flags.c_contiguous and g.flags.writeable for g in got)


def test_gather_of_mixed_dtypes_takes_each_array():
    got = gather([np.array([1, 2, 3]), np.array([0.5, 1.5, 2.5])], np.array([2, 0]))
    assert [g.dtype.kind for g in got] == ["i", "f"]
    assert [g.tolist() for g in got] == [[3, 1], [2.5, 0.5]]


def _by_rows(cols, keys):
    """Columns._factorize without the runs: every key's codes over all rows (the path of a short table)."""
    per = [cols.codes(k) for k in keys]
    codes, idx = _distinct([c for c, _ in per], [max(len(u), 1) for _, u in per], len(cols))
    return codes, {k: np.asarray(u)[i] for k, (_, u), i in zip(keys, per, idx)}


runs = st.tuples(
    st.lists(st.tuples(st.integers(0, 9), st.sampled_from([1, 2, 4, 8, 16_384, 300_000])), min_size=1, max_size=40),
    st.integers(1, 12),
    st.integers(0, 2**31),
)


@settings(max_examples=40, deadline=None)
@given(runs)
def test_factorising_through_runs_gives_the_codes_of_every_row(data):
    # a candidate table's shape: each plan's slow columns (a, b) repeated for every pair of fast ones (z, recompute)
    plans, pairs, seed = data
    reps = max(1, -(-_RUN_ROWS // (len(plans) * pairs)))  # at least _RUN_ROWS rows: the runs are used
    a, b = (np.repeat(np.tile([p[i] for p in plans], reps), pairs) for i in (0, 1))
    rng = np.random.default_rng(seed)
    n = len(a)
    z, r = np.tile(np.arange(pairs) % 4, n // pairs), rng.integers(0, 3, n)
    for keys in (["a"], ["b", "a"], ["a", "z"], ["z", "b", "recompute"], ["recompute"], ["a", "b", "z", "recompute"]):
        cols = Columns(dict(a=a, b=b, z=z), {"recompute": (r, MODES)})
        codes, uniq = cols.factorize(keys)
        want, values = _by_rows(Columns(dict(a=a, b=b, z=z), {"recompute": (r, MODES)}), keys)
        assert codes.tolist() == want.tolist()
        for k in keys:
            assert np.asarray(uniq[k]).tolist() == values[k].tolist()


def test_runs_of_a_repeated_table_hand_derived():
    # 512 runs of eight rows: a = 0..511 (one run each, 511 changes in 4,096 rows: at most one in _RUN_SHARE = 4), z
    # alternating 0, 1 inside a run; the distinct (a, z) pairs are numbered a * 2 + z (codes in the order of their
    # numbers: a's codes are its values, z's 0 and 1)
    a = np.repeat(np.arange(512), 8)
    z = np.tile([0, 1], 2048)
    cols = Columns(dict(a=a, z=z))
    assert cols._factorize_runs(["a", "z"]) is not None  # the runs are used
    codes, uniq = cols.factorize(["a", "z"])
    assert codes[:10].tolist() == [0, 1, 0, 1, 0, 1, 0, 1, 2, 3]
    assert len(uniq) == 1024 and uniq["a"][-1] == 511 and uniq["z"][-1] == 1
    assert cols._factorize_runs(["z"]) is None  # z changes every row: no runs
