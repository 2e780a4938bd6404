"""Request traffic and the queueing formulas the inference capacity planner sizes replicas with
(:mod:`hnplan.planning.inference.capacity`): request lengths as numbers or distributions
(:class:`Traffic`), the probability of waiting in M/M/c (:func:`erlang_c`) and the mean wait in M/G/c
(:func:`mgc_wait_s`).

References
----------
.. [1] A. K. Erlang (1917); Kleinrock, "Queueing Systems Vol. 1", 1975, Sec. 3.5 (M/M/c, Erlang C).
.. [2] Lee & Longton, "Queueing processes associated with airline passenger check-in", Operational
   Research Quarterly 10, 1959 (W(M/G/c) ~ (1 + cs^2)/2 W(M/M/c)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hnplan.errors import InputError


# --- traffic ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Traffic:
    """Request lengths: a fixed number of tokens or a frozen ``scipy.stats`` distribution each.

    Attributes
    ----------
    input_tokens, output_tokens : float or scipy.stats frozen distribution
    samples : int
        Draws used to summarise a distribution (seeded, reproducible).
    seed : int
    """

    input_tokens: object
    output_tokens: object
    samples: int = 4096
    seed: int = 0

    def __post_init__(self) -> None:
        """Refuse a length that is not a number >= 1 (or a distribution), as ``hnplan infer`` refuses its flags.

        >>> Traffic(2000, -500)
        Traceback (most recent call last):
        ...
        hnplan.errors.InputError: output_tokens must be a number >= 1 or a scipy.stats distribution; got -500
        """
        for name in ("input_tokens", "output_tokens"):
            v = getattr(self, name)
            if hasattr(v, "rvs"):
                continue
            ok = isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and 1 <= float(v) < np.inf
            if not ok:
                raise InputError(f"{name} must be a number >= 1 or a scipy.stats distribution; got {v!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, (int, np.integer)) or self.samples < 1:
            raise InputError(f"samples must be a whole number >= 1; got {self.samples!r}")

    @classmethod
    def lognormal(cls, input_tokens: float, output_tokens: float, input_cv: float = 0.0, output_cv: float = 0.0):
        """Lengths of the given means, each log-normal with coefficient of variation ``*_cv`` (0: fixed):
        ``sigma^2 = ln(1 + cv^2)``, ``scale = mean exp(-sigma^2 / 2)`` (the log-normal's mean and variance). The shape
        is a labelled assumption for long-tailed request lengths (Splitwise, Patel et al. ISCA 2024, shows production
        prompt and output lengths spread over orders of magnitude); a traffic of measured lengths is a
        ``scipy.stats`` distribution of its own.

        >>> t = Traffic.lognormal(2000, 500, output_cv=1.0).summary()
        >>> round(t["output_mean"] / 500, 1), round(t["output_cs2"], 1)
        (1.0, 0.9)

        Raises
        ------
        InputError
            For a negative coefficient of variation.
        """

        def length(mean: float, cv: float, name: str):
            if not 0 <= cv < np.inf:
                raise InputError(f"{name} must be a finite number >= 0; got {cv:g}")
            if cv == 0:
                return mean
            from scipy import stats  # here: a fixed length needs no scipy.stats (half a second of start-up)

            sigma = float(np.sqrt(np.log1p(cv * cv)))
            return stats.lognorm(s=sigma, scale=mean * float(np.exp(-sigma * sigma / 2)))

        return cls(length(input_tokens, input_cv, "input_cv"), length(output_tokens, output_cv, "output_cv"))

    def draws(self) -> tuple[np.ndarray, np.ndarray]:
        """Sampled (input, output) lengths [tokens], each at least 1."""
        rng = np.random.default_rng(self.seed)
        out = []
        for d in (self.input_tokens, self.output_tokens):
            if hasattr(d, "rvs"):
                x = np.asarray(d.rvs(size=self.samples, random_state=rng), dtype=float)
            else:
                x = np.full(self.samples, float(d))  # type: ignore[arg-type]  # a number when not a distribution
            out.append(np.maximum(np.round(x), 1.0))
        return out[0], out[1]

    def summary(self) -> dict:
        """``input_mean, output_mean`` [tokens]; ``context_mean``: KV length seen by an output token,
        ``E[O (I + O/2)] / E[O]`` [tokens]; ``context_p99``: 99th percentile of ``I + O`` [tokens],
        held in memory; ``output_cs2``: squared coefficient of variation of O [-]."""
        i, o = self.draws()
        return {
            "input_mean": float(i.mean()),
            "output_mean": float(o.mean()),
            "context_mean": float(np.sum(o * (i + o / 2)) / np.sum(o)),
            "context_p99": float(np.percentile(i + o, 99)),
            "output_cs2": float(o.var() / o.mean() ** 2),
        }


# --- queueing ----------------------------------------------------------------------------------------------
def erlang_c(servers, offered_load):
    """Probability that an arrival waits in M/M/c with ``servers`` and ``offered_load = lambda S``
    [-] ([1]_), through Poisson terms so that large c stays finite: ``C = p_c c/(c-a) /
    (P(N <= c-1) + p_c c/(c-a))`` with ``N ~ Poisson(a)``. 1 when ``a >= c``.

    >>> round(float(erlang_c(1, 0.5)), 3)      # M/M/1: P(wait) = rho
    0.5
    """
    # scipy.special's Poisson terms (what scipy.stats.poisson evaluates), imported here: scipy.stats itself
    # costs about 0.5 s of start-up to every importer, scipy.special about 0.1 s
    from scipy.special import gammaln, pdtr, xlogy

    c = np.asarray(servers, dtype=float)
    a = np.asarray(offered_load, dtype=float)
    ok = a < c
    pmf_c = np.exp(xlogy(c, a) - gammaln(c + 1.0) - a)  # P(N = c), N ~ Poisson(a)
    tail = pmf_c * c / np.where(ok, c - a, 1.0)
    cval = np.where(ok, tail / (pdtr(c - 1, a) + tail), 1.0)  # pdtr(k, a) = P(N <= k)
    return float(cval) if np.ndim(cval) == 0 else cval


#: the percentiles a TTFT bound may be judged at, as fractions (``mean``: the mean wait)
TTFT_QUANTILES = {"mean": None, "p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


def mgc_wait_quantile_s(rate_per_s, servers, service_s, cs2: float, q: float | None):
    """The ``q`` quantile of the wait in queue of M/G/c [s]; the mean (:func:`mgc_wait_s`) for ``q`` None.

    In M/M/c a request waits with probability ``C = C(c, a)`` and, when it does, an exponential time of mean
    ``S / (c - a)`` ([1]_): ``P(W > t) = C exp(-(c - a) t / S)``, so ``W_q = ln(C / (1 - q)) S / (c - a)`` where
    ``C > 1 - q``, else 0. M/G/c takes the conditional wait times ``(1 + cs2) / 2`` as the mean does ([2]_), the
    tail kept exponential: an approximation (labelled), exact for M/M/c; inf at ``a >= c``.

    >>> round(float(mgc_wait_quantile_s(0.5, 1, 1.0, 1.0, 0.99)), 3)  # M/M/1, rho 0.5: ln(0.5 / 0.01) / 0.5
    7.824
    >>> float(mgc_wait_quantile_s(0.5, 1, 1.0, 1.0, 0.4))  # waits with probability 0.5 < 1 - 0.4: none at p40
    0.0
    """
    if q is None:
        return mgc_wait_s(rate_per_s, servers, service_s, cs2)
    a = np.asarray(rate_per_s, dtype=float) * service_s
    c = np.asarray(servers, dtype=float)
    wait_prob = erlang_c(c, a)
    scale = (1.0 + cs2) / 2.0 * service_s / np.where(a < c, c - a, 1.0)
    w = np.where(wait_prob > 1.0 - q, np.log(np.maximum(wait_prob, 1e-300) / (1.0 - q)) * scale, 0.0)
    w = np.where(a < c, w, np.inf)
    return float(w) if np.ndim(w) == 0 else w


def md1_wait_quantile_s(rate_per_s, service_s, q: float | None):
    """The ``q`` quantile of the wait in queue of M/D/1 [s] (the prefill pools': one request's pass, ``service_s``):
    the mean ``rho S / (2 (1 - rho))`` (Pollaczek-Khinchine) for ``q`` None, else :func:`mgc_wait_quantile_s` with
    one server and ``cs2 = 0``; inf at ``rho >= 1``.

    >>> round(md1_wait_quantile_s(0.5, 1.0, None), 3), round(md1_wait_quantile_s(0.5, 1.0, 0.99), 3)
    (0.5, 3.912)
    """
    rho = rate_per_s * service_s
    if rho >= 1.0:
        return float("inf")
    if q is None:
        return rho * service_s / (2.0 * (1.0 - rho))
    return float(mgc_wait_quantile_s(rate_per_s, 1, service_s, 0.0, q))


def mgc_wait_s(rate_per_s, servers, service_s, cs2: float = 0.0):
    """Mean wait in queue of M/G/c [s]: ``(1 + cs2)/2 x C(c, a) S / (c - a)`` ([2]_); inf at ``a >= c``."""
    a = np.asarray(rate_per_s, dtype=float) * service_s
    c = np.asarray(servers, dtype=float)
    w = (1.0 + cs2) / 2.0 * erlang_c(c, a) * service_s / np.where(a < c, c - a, 1.0)
    w = np.where(a < c, w, np.inf)
    return float(w) if np.ndim(w) == 0 else w
