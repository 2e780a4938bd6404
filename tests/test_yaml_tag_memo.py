"""The strict YAML loader remembers each plain scalar's resolved tag by its text and implicitness
(hnplan.catalog.yaml_io._StrictLoader.resolve): two scalars that resolve differently must never share an entry,
whatever order they are first met in (a quoted ``'true'`` after a plain ``true``, ``1e12`` after ``'1e12'``)."""

from __future__ import annotations

import datetime as dt
import re

import yaml

from hnplan.catalog.yaml_io import _StrictLoader, read_yaml

SCALARS = ["true", "True", "yes", "no", "on", "off", "~", "null", "", "1", "01", "0x1F", "0o17", "1_000", "1e12",
           "-1.5E-3", "1.0", ".inf", "-.Inf", ".nan", "2024-03-21", "2024-03-21 10:00:00", "12:30", "bf16", "1e",
           "1,5", "-1"]  # fmt: skip


class _Reference(yaml.SafeLoader):
    """PyYAML's pure-Python safe loader with the strict loader's YAML 1.2 float pattern, no memo."""


_Reference.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def _doc(order):
    lines = []
    for i, (s, quoted) in enumerate(order):
        lines.append(f"k{i}: " + (f"'{s}'" if quoted else s))
    return "\n".join(lines) + "\n"


def _same(a, b):
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def test_every_scalar_resolves_as_without_the_memo_quoted_first_and_plain_first():
    for order in (
        [(s, q) for s in SCALARS for q in (True, False)],
        [(s, q) for s in SCALARS for q in (False, True)],
        [(s, q) for q in (False, True) for s in reversed(SCALARS)],
    ):
        text = _doc(order)
        got = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a safe loader)
        want = yaml.load(text, Loader=_Reference)  # noqa: S506 (a safe loader)
        assert got.keys() == want.keys()
        for k in want:
            assert _same(got[k], want[k]), (k, got[k], want[k])
    # by hand: YAML 1.1 as PyYAML resolves it, plus the 1.2 float
    d = yaml.load("a: 1e12\nb: '1e12'\nc: yes\nd: 'yes'\ne: 2024-03-21\nf: 0x1F\n", Loader=_StrictLoader)  # noqa: S506
    assert d == {"a": 1e12, "b": "1e12", "c": True, "d": "yes", "e": dt.date(2024, 3, 21), "f": 31}
    assert type(d["a"]) is float and type(d["b"]) is str


def test_string_keys_taken_as_text_still_refuse_a_key_given_twice(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("id: a\nsource: x\nid: b\n")
    try:
        read_yaml(p)
    except Exception as exc:  # CatalogError naming the key and the first line
        assert "duplicate key 'id' (first given on line 1)" in str(exc)
    else:
        raise AssertionError("a key given twice was read")
    # a quoted '1' and a plain 1 are two keys (str and int), and 'false' and false too
    p.write_text("'1': a\n1: b\n'false': c\nfalse: d\n")
    assert read_yaml(p) == {"1": "a", 1: "b", "false": "c", False: "d"}
