"""Exceptions raised by hnplan.

``HnplanError`` is the root. Bad input (a catalog file, a scenario, a CLI flag) raises a subclass of
``InputError`` whose message names the file, the entry, the field and the allowed values.
``InfeasiblePlan`` is distinct: the input is valid but the plan does not divide or does not fit;
searches catch it to prune a candidate, and the CLI reports it as an answer, not a crash.
"""

from __future__ import annotations


class HnplanError(Exception):
    """Root of every error hnplan raises on purpose."""


class InputError(HnplanError, ValueError):
    """Invalid user input: a flag, a parameter or a file.

    Attributes
    ----------
    path : str or None
        The file at fault, where there is one (a trace's CSV): ``--json`` errors carry it as ``path``.
    """

    def __init__(self, *args, path=None):
        super().__init__(*args)
        self.path = None if path is None else str(path)


class CatalogError(InputError):
    """A catalog file or entry is invalid, or an id is unknown.

    Attributes
    ----------
    path : str or None
        The file at fault, where there is one.
    entry : str or None
        The entry id.
    field : str or None
        The dotted field name.
    problems : list of str
        Each problem apart (one sentence naming its field), where the message joins several; else empty.
    """

    def __init__(self, message: str, *, path=None, entry=None, field=None, problems=None):
        super().__init__(message)
        self.path = None if path is None else str(path)
        self.entry = entry
        self.field = field
        self.problems: list[str] = list(problems or [])


class ScenarioError(InputError):
    """A scenario file is invalid (unknown notebook, unknown catalog id, bad type)."""


class InfeasiblePlan(HnplanError):
    """A valid input whose plan cannot run: degrees that do not divide, memory that does not fit."""


class PlanRuleError(InfeasiblePlan):
    """A plan that breaks one of the divisibility rules (:mod:`hnplan.compute.layout` for the model's
    split, :func:`hnplan.planning.training.plan_rules` for a training plan); the message names the
    rule and the values. Searches drop such candidates; a plan given in full exits 3 with it."""


def check_choice(name: str, value, allowed) -> None:
    """Raise :class:`InputError` unless ``value`` is one of ``allowed``; the message lists them.

    >>> check_choice("recompute", "some", ("none", "selective", "full"))
    Traceback (most recent call last):
    ...
    hnplan.errors.InputError: recompute must be one of none, selective, full; got 'some'
    """
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}")
