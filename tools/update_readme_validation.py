"""Regenerate the training-runs validation table in README.md from hnplan.planning.validation."""

import re
from pathlib import Path

from hnplan.planning.validation import RUNS_BEGIN, RUNS_END, runs_markdown, validation_table

if __name__ == "__main__":
    path = Path(__file__).resolve().parents[1] / "README.md"
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(RUNS_BEGIN) + ".*?" + re.escape(RUNS_END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {RUNS_BEGIN!r} ... {RUNS_END!r} block")
    new = pattern.sub(lambda _: f"{RUNS_BEGIN}\n{runs_markdown(validation_table())}\n{RUNS_END}", text)
    path.write_text(new, encoding="utf-8")
    print("README.md updated" if new != text else "README.md already current")
