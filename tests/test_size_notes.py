"""`hnplan size`'s notes on the GPU counts a deadline search skipped: one line per reason, whatever example
batch each count's hint gives."""

from hnplan.cli.size_cmd import _skipped_lines
from hnplan.planning.training.candidates import divisibility_hint


def _reason(gpus: int, batch: int, unit: int, system: str) -> dict:
    return {
        "gpus": gpus,
        "reason": f"no plan on {gpus:,} x {system} divides; {divisibility_hint(gpus, batch, unit, system)}",
    }


def test_counts_whose_example_batches_differ_share_one_line():
    # DeepSeek-V3 at 4,096 sequences a step on GB200 NVL72: 216 GPUs want ceil(4,096 / 216) = 19 sequences a GPU
    # (4,104), 648 want 7 (4,536), 720 and 864 want 6 and 5 (4,320 both): four reasons that differ only in the
    # example were four lines each repeating the whole rule (40 lines for three designs)
    rows = [_reason(n, 4096, 72, "gb200-nvl72") for n in (216, 648, 720, 864)]
    assert [r["reason"].rsplit("such as ", 1)[1] for r in rows] == [
        "4,104 sequences, 19 per GPU",
        "4,536 sequences, 7 per GPU",
        "4,320 sequences, 6 per GPU",
        "4,320 sequences, 5 per GPU",
    ]
    (line,) = _skipped_lines("gb200-nvl72", rows)
    assert line == (
        "gb200-nvl72: skipped 216, 648, 720, 864 GPUs: no plan on N x gb200-nvl72 divides; every count of "
        "gb200-nvl72 has the factor 9 (units of 72 GPUs): try a batch with that factor, such as a multiple of N "
        "sequences"
    )
    # the same K sequences a GPU: said as N x K
    rows = [
        _reason(n, 4096, 8, "hgx-b200-ib-xdr") for n in (1440, 1600)
    ]  # ceil(4,096 / 1,440) = ceil(4,096 / 1,600) = 3
    (line,) = _skipped_lines("hgx-b200-ib-xdr", rows)
    assert line.endswith(
        "try a GPU count with more factors of two, or a batch with N's odd factor, such as N x 3 sequences, 3 per GPU"
    )
    # one count keeps its own example
    (line,) = _skipped_lines("gb200-nvl72", rows[:1])
    assert line.endswith("a batch with the factor 45, such as 4,320 sequences, 3 per GPU")
