"""The sweep dataset on disk: chunk writes are atomic, and a file cut short is named, not a traceback."""

import pandas as pd
import pytest

from hnplan.errors import InputError
from hnplan.planning.sweep_io import COLUMNS, done_point_ids, done_rows, read_sweep, replace_rows, write_chunk


def _chunk(ids, system="gb200-nvl72") -> pd.DataFrame:
    df = pd.DataFrame({c: [None] * len(ids) for c in COLUMNS})
    df["point_id"], df["system"], df["days_to_train"] = list(ids), system, [10.0 + i for i in range(len(ids))]
    return df


def test_chunks_land_whole_and_leave_no_scratch(tmp_path):
    write_chunk(_chunk(["a1", "a2"]), tmp_path, "part-a1")
    write_chunk(_chunk(["b1"], "hgx-h100-ib-ndr"), tmp_path, "part-b1")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "system=gb200-nvl72/part-a1-0.parquet",
        "system=hgx-h100-ib-ndr/part-b1-0.parquet",
    ]
    # a run killed mid-write leaves its scratch folder (hidden: Arrow readers skip it), never a dataset file
    scratch = tmp_path / ".writing-part-c1" / "system=gb200-nvl72"
    scratch.mkdir(parents=True)
    (scratch / "part-c1-0.parquet").write_bytes(b"PAR1 cut short")
    assert done_point_ids(tmp_path) == {"a1", "a2", "b1"}
    assert read_sweep(tmp_path)["days_to_train"].tolist() == [10.0, 11.0, 10.0]


def test_a_file_cut_short_is_named(tmp_path):
    # a chunk truncated by a killed writer stopped the resume with pyarrow's "magic bytes" traceback
    write_chunk(_chunk(["a1"]), tmp_path, "part-a1")
    bad = tmp_path / "system=gb200-nvl72" / "part-b1-0.parquet"
    good = (tmp_path / "system=gb200-nvl72" / "part-a1-0.parquet").read_bytes()
    bad.write_bytes(good[: len(good) // 2])
    for read in (done_point_ids, read_sweep):
        with pytest.raises(InputError, match=f"{bad}: not a readable Parquet file .*delete it and run the sweep again"):
            read(tmp_path)


def test_rows_replaced_file_by_file_and_never_twice(tmp_path, monkeypatch):
    """A retried point's new row takes the place of its failed one inside the file that held it; a run killed
    before the rename leaves the old file as it was (each point in one row) and a hidden scratch file that
    readers leave out."""
    import os

    df = _chunk(["a1", "a2"])
    df["error"] = [None, "a cause since fixed"]
    write_chunk(df, tmp_path, "part-a1")
    rows = done_rows(tmp_path).set_index("point_id")
    assert rows["failed"].tolist() == [False, True] and pd.isna(rows.loc["a1", "code_fingerprint"])
    new = _chunk(["a2"])
    new["days_to_train"] = [42.0]

    def killed(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        replace_rows(new, tmp_path, rows["file"].to_dict())
    assert read_sweep(tmp_path)["days_to_train"].tolist() == [10.0, 11.0]
    monkeypatch.undo()
    replace_rows(new, tmp_path, rows["file"].to_dict())
    got = read_sweep(tmp_path)
    assert got["point_id"].tolist() == ["a1", "a2"] and got["days_to_train"].tolist() == [10.0, 42.0]
    assert got["error"].isna().all() and got["system"].eq("gb200-nvl72").all()
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["part-a1-0.parquet"]


def test_other_files_in_the_folder_are_left_alone(tmp_path):
    """A sweep written into a folder that holds other files (a README, the spec kept beside its dataset, an
    empty file) ran once, then every resume ended in pyarrow's traceback (``Could not open Parquet input source
    '.../spec.yaml': Parquet magic bytes not found``, exit 1): the dataset is its ``*.parquet`` files."""
    (tmp_path / "spec.yaml").write_text("id: x\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("# runs\n")
    write_chunk(_chunk(["a1", "a2"]), tmp_path, "part-a1")
    assert done_point_ids(tmp_path) == {"a1", "a2"}
    assert set(done_rows(tmp_path)["file"]) == {str(tmp_path / "system=gb200-nvl72" / "part-a1-0.parquet")}
    df = read_sweep(tmp_path)
    assert df["days_to_train"].tolist() == [10.0, 11.0] and df["system"].tolist() == ["gb200-nvl72"] * 2
