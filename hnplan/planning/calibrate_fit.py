"""Bounded least squares over a few named efficiencies, with the identifiability test that decides
which of them a set of measurements can fit (used by :mod:`hnplan.planning.calibrate`).

A calibration fits physical efficiencies of a software stack or a network (a GEMM efficiency, an
overlap fraction, a link's bandwidth efficiency) to measurements. With few measurements only a few
of them are identified: one measurement pins one number; two runs that stress GEMMs and
communication in the same proportion cannot tell a slower GEMM from a less hidden collective. The
test below keeps, in a stated order of priority, each parameter that (a) moves the predictions by at
least :data:`MIN_SENSITIVITY` across its bounds, (b) is not (nearly) collinear with those already
kept, and (c) stays within one parameter per measurement; the others stay at their catalog values,
each with the reason.

The residual of measurement ``i`` is ``ln(predicted_i / measured_i)``: a relative error, symmetric
in over- and under-prediction and the same whether the metric is a time or a rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from hnplan.lazy_modules import defer_numpy_tools

METHOD = "scipy.optimize.least_squares (trust-region reflective, bounded), residual ln(predicted / measured)"
#: a parameter that moves no prediction by more than this across its bounds (in ln units, ~2 %) is
#: not identified by the measurements (assumption: about the spread of repeated runs of one benchmark)
MIN_SENSITIVITY = 0.02
#: the solver stops once the first-order optimality (the gradient of the cost in the bounds-scaled
#: parameters) is below this: on the README's example runs that leaves the fitted GEMM efficiency 1.1e-5
#: from the minimum (0.0014 %; a prediction moves by 0.001 %), below the 4 decimals a calibrated stack
#: file keeps and far below the spread of repeated runs, one iteration (two trials) sooner than scipy's
#: default 1e-8; assumption: a solver tolerance, not tuned to any data set's values
GTOL = 1e-5
#: smallest singular value of the unit-normalised sensitivity columns of the kept parameters below
#: which a new parameter is taken as collinear with them (the measurements cannot separate it);
#: assumption: a conventional rank cut-off for unit-normalised columns, not tuned to any data set
MIN_SINGULAR = 0.1


@dataclass(frozen=True)
class Parameter:
    """One efficiency a calibration may fit.

    Attributes
    ----------
    name : str
        Dotted field of the catalog entry it belongs to, e.g. ``matmul_efficiency.h100-sxm.bf16``,
        ``tp_comm_overlap_fraction``, ``bw_efficiency.nvlink4`` [-].
    initial : float
        The catalog value the fit starts from (and keeps when the parameter is not fitted) [-].
    lower, upper : float
        Bounds of the fit [-].
    value : float
        The value after the calibration (``initial`` when not fitted) [-].
    fitted : bool
        Whether the measurements identified it and the fit moved it.
    note : str
        Why it was fixed, or what identified it.
    """

    name: str
    initial: float
    lower: float
    upper: float
    value: float = math.nan
    fitted: bool = False
    note: str = ""

    @property
    def at_bound(self) -> bool:
        """A fitted value on (within 0.1 % of the range of) one of its bounds: the measurements ask for
        more than the bounds allow, a sign that something else in the model is off."""
        tol = 1e-3 * (self.upper - self.lower)
        return self.fitted and (self.value - self.lower <= tol or self.upper - self.value <= tol)

    def as_dict(self) -> dict:
        return dict(
            name=self.name,
            initial=self.initial,
            value=self.value,
            lower=self.lower,
            upper=self.upper,
            fitted=self.fitted,
            at_bound=self.at_bound,
            note=self.note,
        )


Residuals = Callable[[np.ndarray], np.ndarray]


def _x0(params: Sequence[Parameter]) -> np.ndarray:
    return np.array([min(max(p.initial, p.lower), p.upper) for p in params], dtype=float)


def sensitivities(residuals: Residuals, params: Sequence[Parameter]) -> np.ndarray:
    """``J[i, j]``: change of residual ``i`` when parameter ``j`` goes from its lower to its upper
    bound, the others at their initial values [ln units], shape ``(measurements, parameters)``.

    A secant over the whole range rather than a local derivative: the step-time and collective
    models take maxima and minima (a collective limited by the slower of two tiers, communication
    hidden up to the compute it overlaps), so a parameter can sit on a flat side of a kink at its
    catalog value and still matter once it moves.
    """
    x0 = _x0(params)
    cols = []
    for j, p in enumerate(params):
        lo, hi = x0.copy(), x0.copy()
        lo[j], hi[j] = p.lower, p.upper
        cols.append(residuals(hi) - residuals(lo))
    return np.column_stack(cols) if cols else np.zeros((len(residuals(x0)), 0))


def identify(residuals: Residuals, params: Sequence[Parameter], what: str = "measurements") -> list[Parameter]:
    """Mark the parameters the measurements identify (``fitted=True``), in the order given (the
    priority); the others keep their initial value, with the reason in ``note``.

    Parameters
    ----------
    residuals : callable
        ``x -> ln(predicted / measured)`` for every measurement, ``x`` the parameter values in order.
    params : sequence of Parameter
    what : str
        How to name the measurements in the notes (``runs``, ``nccl-tests rows``).
    """
    if not params:
        return []
    J = sensitivities(residuals, params)
    n_obs = J.shape[0]
    kept: list[int] = []
    out = []
    for j, p in enumerate(params):
        col = J[:, j]
        reach = float(np.max(np.abs(col))) if col.size else 0.0
        if reach < MIN_SENSITIVITY:
            note = (
                f"fixed: across its bounds it moves no prediction of these {what} by more than "
                f"{100 * (math.exp(reach) - 1):.1f} % (they do not exercise it)"
            )
        elif len(kept) >= n_obs:
            note = f"fixed: {n_obs} {what} identify at most {n_obs} parameter{'s' if n_obs > 1 else ''}"
        else:
            cols = J[:, [*kept, j]]
            unit = cols / np.linalg.norm(cols, axis=0)
            smallest = float(np.linalg.svd(unit, compute_uv=False).min())
            if smallest < MIN_SINGULAR:
                others = ", ".join(params[k].name for k in kept)
                note = (
                    f"fixed: these {what} move it and {others} in the same proportion (singular value "
                    f"{smallest:.2f}); measurements that stress them differently would separate them"
                )
            else:
                kept.append(j)
                out.append(
                    replace(
                        p, fitted=True, note=f"fitted: across its bounds it moves a prediction by {reach:.2f} in ln"
                    )
                )
                continue
        out.append(replace(p, value=p.initial, fitted=False, note=note))
    return out


def fit(
    residuals: Residuals, params: Sequence[Parameter], start: dict[str, float] | None = None
) -> tuple[list[Parameter], dict]:
    """Fit the parameters marked ``fitted`` (by :func:`identify`) with
    :func:`scipy.optimize.least_squares` (trust-region reflective within the bounds, 2-point
    Jacobian, stopped at first-order optimality :data:`GTOL`); the others stay at their initial values.

    Parameters
    ----------
    residuals : callable
        ``x -> ln(predicted / measured)`` for every measurement, ``x`` the parameter values in order.
    params : sequence of Parameter
    start : dict of str to float, optional
        Where the solver starts for the fitted parameters it names (clipped to the bounds), instead of
        their initial values: a fit to a subset of the measurements (a leave-one-out fit) started from
        the fit to all of them, which lies near its answer. The answer is the same minimum (to the
        solver's tolerances) in fewer evaluations; ``initial`` stays the catalog value.

    Returns
    -------
    (list of Parameter, dict)
        The parameters with ``value`` set, and ``{"nfev", "cost", "status", "message"}`` of the solver
        (``nfev`` 0 when nothing is fitted).
    """
    x0 = _x0(params)
    free = [j for j, p in enumerate(params) if p.fitted]
    if not free:
        return [replace(p, value=p.initial) for p in params], dict(nfev=0, cost=None, status=None, message="")
    lo = np.array([params[j].lower for j in free])
    hi = np.array([params[j].upper for j in free])
    z0 = np.array([min(max((start or {}).get(params[j].name, x0[j]), params[j].lower), params[j].upper) for j in free])

    def full(z):
        x = x0.copy()
        x[free] = z
        return x

    # imported here, when there is something to fit: the package's import (scipy.optimize's ``__init__`` loads
    # every solver, about 0.25 s of CPU) then follows the reading and checking of the measurements, so a bad
    # input file is answered without it, and a fit that identifies nothing never pays it; numpy's f2py and
    # testing, which SciPy's copy of numpy's namespace would import, are left until used (hnplan.lazy_modules)
    defer_numpy_tools()
    from scipy.optimize import least_squares

    res = least_squares(
        lambda z: residuals(full(z)),
        z0,
        bounds=(lo, hi),
        method="trf",
        x_scale=hi - lo,
        diff_step=1e-4,
        xtol=1e-8,
        ftol=1e-8,
        gtol=GTOL,
    )
    x = full(res.x)
    out = [replace(p, value=float(x[j])) for j, p in enumerate(params)]
    r1 = residuals(x)
    for j in free:  # a parameter on the flat side of a kink at the solution is not (fully) determined
        p = params[j]
        h = 0.01 * (p.upper - p.lower)
        flat = []
        for d in (-h, h):
            xs = x.copy()
            xs[j] = min(max(x[j] + d, p.lower), p.upper)
            flat.append(xs[j] == x[j] or float(np.max(np.abs(residuals(xs) - r1))) < 1e-9)
        if all(flat):
            note = "fixed: at the fitted values no measurement depends on it (another limit binds)"
            out[j] = replace(p, value=p.initial, fitted=False, note=note)
        elif any(flat):
            side = "above" if flat[1] else "below"
            out[j] = replace(
                out[j],
                note=f"fitted, one-sided: the measurements bound it only from {'below' if side == 'above' else 'above'}; "
                f"{side} {out[j].value:.3g} another limit binds and they do not see it",
            )
    info = dict(nfev=int(res.nfev), cost=float(res.cost), status=int(res.status), message=str(res.message))
    return out, info
