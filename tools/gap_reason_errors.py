"""List the error figures the validation rows' texts quote against the error each row evaluates to now.

For every training run (data/validation/training_runs.yaml) with a ``gap_reason`` or ``note``, print the first
signed percentage the text quotes, the row's current error in the leading form of a ``gap_reason``
(:data:`hnplan.planning.validation.LEADING_ERROR`: ``reported, not asserted: the model is optimistic (-36.2 %: 46.0
ms against 72.1 ms ...``) with the modelled value it quotes, and the row's error and modelled value now; then every
later statement of a row's error now (``... this row stands at +12.7 %``) and every figure quoted for another row
(``row ID, -5.2 %``), each against that row's error now. A figure more than ``--points`` (default 1) off is marked
STALE. Other figures (a what-if, a change at its time: ``x -> y``) are listed for reading only. ``--inference``
lists the serving rows' notes (hnplan.planning.inference.measurements) that quote a signed percentage.

Usage: ``python tools/gap_reason_errors.py [--stale] [--points 1.0] [--inference]``
"""

from __future__ import annotations

import argparse
import re

from hnplan.catalog.runs import training_runs
from hnplan.planning.validation import LEADING_ERROR, leading_error, validation_table

SIGNED = re.compile(r"[+-]\d+(?:\.\d+)? ?%")
MODELLED = re.compile(r"%: (?P<model>[\d,.]+) ?(?:ms|s|tokens/s)? against (?P<pub>[\d,.]+)")
STANDS_AT = re.compile(r"(?:this row|it) stands at (?P<err>[+-]\d+(?:\.\d+)?) ?%")
OTHER_ROW = re.compile(
    r"row (?P<id>[a-z0-9][a-z0-9.-]*[a-z0-9])(?:,| is|\)| \()\s*(?:is |at |reads )?(?P<err>[+-]\d+(?:\.\d+)?) ?%"
)


def _flag(quoted: float, now: float, points: float) -> str:
    return "STALE" if abs(quoted - now) > points else "ok"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--stale", action="store_true", help="only the figures off by more than --points")
    ap.add_argument("--points", type=float, default=1.0, help="how far a quoted error may be off [points]")
    ap.add_argument("--inference", action="store_true", help="the serving rows' notes too")
    a = ap.parse_args()
    runs = {r.id: r for r in training_runs()}
    table = validation_table()
    err = dict(zip(table["id"], table["error_pct"], strict=True))
    print(f"leading form: {LEADING_ERROR.pattern}\n")
    out: list[tuple[str, str]] = []
    for r in table.itertuples():
        run = runs[r.id]
        for field in ("gap_reason", "note"):
            text = " ".join((getattr(run, field, None) or "").split())
            if not text:
                continue
            first = SIGNED.search(text)
            lead = leading_error(text) if field == "gap_reason" else None
            scale = 1e3 if "ms against" in text[:160] else 1.0
            m = MODELLED.search(text[:160]) if lead is not None else None
            flag = "." if lead is None else _flag(lead, r.error_pct, a.points)
            out.append(
                (
                    flag,
                    f"{r.id} [{field}] first {first.group().replace(' ', '') if first else '-'}, leading "
                    f"{'-' if lead is None else f'{lead:+.1f} %'}"
                    f"{f' (quoted model {m.group(1)})' if m else ''}; now {r.error_pct:+.1f} % "
                    f"({r.metric} {r.predicted * scale:.4g} against {r.published * scale:.4g})",
                )
            )
            for s in STANDS_AT.finditer(text):
                q = float(s.group("err"))
                out.append(
                    (
                        _flag(q, r.error_pct, a.points),
                        f"{r.id} [{field}] stands at {q:+.1f} %; now {r.error_pct:+.1f} %",
                    )
                )
            for o in OTHER_ROW.finditer(text):
                if o.group("id") in err:
                    q, now = float(o.group("err")), err[o.group("id")]
                    out.append(
                        (
                            _flag(q, now, a.points),
                            f"{r.id} [{field}] quotes row {o.group('id')} {q:+.1f} %; now {now:+.1f} %",
                        )
                    )
    for flag, line in out:
        if not a.stale or flag == "STALE":
            print(f"{flag:5} {line}")
    if a.inference:
        from hnplan.planning.inference.validation import validation_table as serving_table

        for s in serving_table().itertuples():
            first = SIGNED.search(s.note or "")
            if first and not a.stale:
                print(f".     {s.id} [note] first {first.group().replace(' ', '')}; now {s.error_pct:+.1f} %")


if __name__ == "__main__":
    main()
