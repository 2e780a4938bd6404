"""Scenario reports: scenario files -> papermill runs -> HTML pages and an index.

``run_reports`` executes each notebook a scenario names with its parameters (papermill), converts the
executed notebook to HTML (nbconvert, code cells hidden, plotly embedded so pages open offline),
and writes ``OUT/<scenario>/<notebook>.ipynb`` / ``.html`` atomically: a failed run never replaces
an earlier good report. ``OUT/index.html`` lists every report with its status, run time and link.
Runs are independent; with ``jobs > 1`` they run in worker processes. A report whose inputs (notebook,
parameters, the files those name, catalog, code: :mod:`hnplan.report_inputs`) have not changed is skipped, decided in
the calling process before any worker starts.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import difflib
import json
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import jinja2

from hnplan import __version__
from hnplan.catalog.loader import Catalog, load_catalog
from hnplan.catalog.schemas import Scenario
from hnplan.errors import CatalogError, ScenarioError
from hnplan.files import atomic_write as _atomic_write
from hnplan.notebook_runner import (  # noqa: F401 - re-exported: the report runner's face
    KERNEL_ARGS,
    escape_dollars,
    export_html,
    quiet_kernel_manager,
    runner_log,
)
from hnplan.report_context import (  # noqa: F401 - re-exported
    check_cluster_jobs,
    check_context,
    check_fabric,
    check_ids,
)
from hnplan.report_footer import provenance  # noqa: F401 - the notebooks' footer, imported from here
from hnplan.report_inputs import (  # noqa: F401 - the skip test's digests, read (and replaced in tests) here
    _code_digest,
    _data_files_digest,
    _inputs_digest,
)
from hnplan.report_params import (  # noqa: F401 - notebook_parameters and resolve_paths re-exported
    DEFAULT_OUT,
    NOTEBOOK_DIR,
    _declared,
    _looks_like_path,
    check_batch,
    check_parameters,
    notebook_parameters,
    notebook_path,
    resolve_paths,
)


@dataclass
class ReportResult:
    """Outcome of one notebook run."""

    scenario: str
    notebook: str
    status: str  # "ok", "failed", "skipped"
    seconds: float
    html: str | None
    error: str | None = None
    title: str = ""


def validate_scenario(scenario: Scenario, catalog: Catalog | None = None, source: str = "") -> None:
    """Check a scenario before anything runs: notebooks exist, each is listed once (its report is
    ``<scenario>/<notebook>.html``), parameter names are declared in the notebook's ``parameters`` cell, and
    catalog ids resolve.

    Raises
    ------
    ScenarioError
        Naming the scenario file, the notebook and the parameter.
    """
    cat = catalog or load_catalog()
    where = source or scenario.id
    names = [item.notebook for item in scenario.notebooks]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:  # both would write <scenario>/<notebook>.html: the second replaced the first
        at = ", ".join(str(i + 1) for i, n in enumerate(names) if n == twice)
        raise ScenarioError(
            f"{where}: notebook {twice!r} is listed more than once (entries {at}); each run writes "
            f"{scenario.id}/{twice}.html, so one would replace the other: put the other parameters in a second "
            "scenario file"
        )
    for item in scenario.notebooks:
        try:
            notebook_path(item.notebook)  # raises, listing the notebooks, if absent
        except ScenarioError as exc:
            raise ScenarioError(f"{where}: {exc}") from None
        item.parameters.update(resolve_paths(check_parameters(item.notebook, item.parameters, where)))
        check_ids(item.notebook, item.parameters, where, cat)
        check_batch(item.notebook, item.parameters, where)
        check_fabric(item.notebook, item.parameters, where, cat)
        check_context(item.notebook, item.parameters, where, cat)
        check_cluster_jobs(item.notebook, item.parameters, where, cat)


def load_scenarios(ref: str, catalog: Catalog | None = None, errors: list[str] | None = None) -> list[Scenario]:
    """Scenarios named by ``ref``: an id, a YAML path, or ``all``; each validated.

    With ``errors`` (a list) and ``ref == "all"``, a scenario that fails its checks is left out and its one-line
    message appended to ``errors`` (as the command line prints it), so the others still run (one broken file in ``data/scenarios/`` stopped
    every report of ``--scenario all``); otherwise the first failure raises.

    Raises
    ------
    CatalogError
        A scenario that does not load or validate (:class:`~hnplan.errors.ScenarioError` for its notebooks and
        parameters), unless collected in ``errors``.
    """
    cat = catalog or load_catalog()
    refs = cat.scenario_ids() if ref == "all" else [ref]
    out = []
    for r in refs:
        try:
            sc = cat.scenario(r)
            _check_own_id(sc, r, cat)
            validate_scenario(sc, cat, source=r)
        except (CatalogError, ScenarioError) as exc:
            if errors is None or ref != "all":
                raise
            errors.append(str(exc) if isinstance(exc, ScenarioError) else f"--scenario: {exc}")  # as raised
            continue
        out.append(sc)
    return out


def _check_own_id(sc: Scenario, ref: str, cat: Catalog) -> None:
    """Refuse a scenario file of the user's whose id is a catalog scenario's: its reports go to ``<out>/<id>/`` and
    would replace that scenario's pages and its index entry under the same id.

    Raises
    ------
    ScenarioError
        Naming the file, the id and the catalog file it shares it with.
    """
    own = cat.root / "scenarios" / f"{sc.id}.yaml"
    if sc.id in cat.scenario_ids() and own.exists() and Path(ref).resolve() != own.resolve() and Path(ref).exists():
        raise ScenarioError(
            f"{ref}: field 'id': '{sc.id}' is the id of the catalog scenario {own.relative_to(cat.root.parent)}, whose "
            "reports yours would replace (reports go to <out>/<id>/); give your scenario an id of its own"
        )


def _up_to_date(
    scenario_id: str,
    notebook: str,
    params: dict,
    out_dir: str,
    catalog_hash: str,
    force: bool,
    title: str = "",
    digest: str | None = None,
) -> ReportResult | None:
    """The ``skipped`` result of a report whose page and stamp exist and whose inputs' digest is the stamp's
    (:func:`_inputs_digest`; ``digest`` when the caller has it already), else None (``force``: always None)."""
    if force:
        return None
    target = Path(out_dir) / scenario_id
    html_path = target / f"{notebook}.html"
    stamp = target / f".{notebook}.inputs"
    if not (html_path.exists() and stamp.exists()):
        return None
    if stamp.read_text() != (digest or _inputs_digest(notebook_path(notebook), params, catalog_hash)):
        return None
    return ReportResult(scenario_id, notebook, "skipped", 0.0, str(html_path.relative_to(out_dir)), title=title)


def _run_one(
    scenario_id: str,
    notebook: str,
    params: dict,
    out_dir: str,
    catalog_hash: str,
    force: bool,
    title: str = "",
    digest: str | None = None,
) -> ReportResult:
    """Run one report's notebook into its page unless it is up to date; ``digest``: its inputs' (the skip test's
    and the new stamp's) where the caller hashed them already."""
    t0 = time.perf_counter()
    nb_path = notebook_path(notebook)
    digest = digest or _inputs_digest(nb_path, params, catalog_hash)
    skipped = _up_to_date(scenario_id, notebook, params, out_dir, catalog_hash, force, title, digest)
    if skipped is not None:
        return skipped
    target = Path(out_dir) / scenario_id
    html_path = target / f"{notebook}.html"
    stamp = target / f".{notebook}.inputs"
    import nbformat  # only when a notebook runs: with papermill, seconds of imports a skip does not need
    import papermill

    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target, prefix=f".{notebook}.run.") as tmp:
        tmp_nb = Path(tmp) / f"{notebook}.ipynb"
        kernel_log = Path(tmp).resolve() / f"{notebook}.kernel.log"  # absolute: papermill runs in cwd
        try:
            for attempt in range(KERNEL_START_TRIES):
                try:
                    with runner_log(kernel_log):
                        papermill.execute_notebook(
                            str(nb_path),
                            str(tmp_nb),
                            parameters=params,
                            progress_bar=False,
                            kernel_name="python3",
                            cwd=str(NOTEBOOK_DIR),
                            log_output=False,
                            extra_arguments=KERNEL_ARGS,
                            kernel_manager_class=quiet_kernel_manager(kernel_log),
                        )
                    break
                except RuntimeError as exc:  # a kernel that died starting ran no cell: start another
                    if KERNEL_START_FAILURE not in str(exc) or attempt + 1 == KERNEL_START_TRIES:
                        raise
            nb = nbformat.read(tmp_nb, as_version=4)
            body = export_html(nb, f"{scenario_id}: {notebook}")
        except Exception as exc:  # noqa: BLE001 - any failure of one notebook is recorded, never fatal
            msg = _short_error(exc)
            if tmp_nb.exists():  # keep the failed notebook for debugging, next to the good report
                _atomic_write(target / f"{notebook}.failed.ipynb", tmp_nb.read_bytes())
            if kernel_log.exists() and kernel_log.stat().st_size:
                _atomic_write(target / f"{notebook}.kernel.log", kernel_log.read_bytes())
            return ReportResult(scenario_id, notebook, "failed", time.perf_counter() - t0, None, msg, title)
        _atomic_write(target / f"{notebook}.ipynb", tmp_nb.read_bytes())
        _atomic_write(html_path, body)
        _atomic_write(stamp, digest)
        (target / f"{notebook}.failed.ipynb").unlink(missing_ok=True)
        (target / f"{notebook}.kernel.log").unlink(missing_ok=True)
    return ReportResult(
        scenario_id, notebook, "ok", time.perf_counter() - t0, str(html_path.relative_to(out_dir)), title=title
    )


#: jupyter_client's error for a kernel process that exited before answering its first request
#: (``BlockingKernelClient.wait_for_ready``): no cell has run, so the notebook can start again on a fresh kernel
KERNEL_START_FAILURE = "Kernel died before replying to kernel_info"
#: kernels started for one notebook before its failure is recorded. A kernel dies starting now and then when
#: several start at once (jupyter/jupyter_client issue 154: intermittent under test runners; the kernel's ports
#: are chosen before it binds them), which under ``--jobs 2`` and a loaded machine failed one report in a run
KERNEL_START_TRIES = 2


def _short_error(exc: Exception) -> str:
    name = getattr(exc, "ename", type(exc).__name__)
    value = getattr(exc, "evalue", str(exc))
    text = f"{name}: {value}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def run_reports(
    scenarios: list[Scenario],
    out_dir: str | Path = DEFAULT_OUT,
    jobs: int = 1,
    only: str | None = None,
    params_override: dict | None = None,
    force: bool = False,
    progress: bool = True,
    catalog: Catalog | None = None,
    params_label: str | None = None,
    params_source: str | None = None,
) -> list[ReportResult]:
    """Run every (scenario, notebook) pair and write the reports and ``index.html``.

    Parameters
    ----------
    scenarios : list of Scenario
        Already validated (see :func:`load_scenarios`).
    out_dir : path
        Output folder.
    jobs : int
        Worker processes (1 runs in this process); no more are started than there are reports to run (none
        when every report is up to date).
    only : str, optional
        Run only this notebook.
    params_override : dict, optional
        Parameters applied on top of each scenario's, to every notebook that declares them; a name no
        notebook declares, or a value of the wrong type, raises ScenarioError.
    force : bool
        Re-run reports whose inputs have not changed.
    params_label : str, optional
        Name of the override set (the --params file's stem): a run with overrides writes to
        ``OUT/<scenario>+<label>/`` under its own title, never over the scenario's own reports.
    params_source : str, optional
        The --params file, named in messages.

    Returns
    -------
    list of ReportResult
        In scenario order; failures are recorded, never raised.
    """
    cat = catalog or load_catalog()
    out = Path(out_dir)
    chash = cat.content_hash()
    where = f"--params {params_source}" if params_source else "--params"
    tasks = []
    for sc in scenarios:
        for item in sc.notebooks:
            if only and item.notebook != only:
                continue
            override = {k: v for k, v in (params_override or {}).items() if k in _declared(item.notebook)}
            override = resolve_paths(check_parameters(item.notebook, override, where))
            check_ids(item.notebook, override, where, cat)
            params = {**item.parameters, **override}
            check_batch(item.notebook, params, where)
            check_fabric(item.notebook, params, where, cat)
            check_context(item.notebook, params, where, cat)
            check_cluster_jobs(item.notebook, params, where, cat)
            run_id, title = sc.id, sc.name
            if params_override:
                run_id, title = params_run_name(sc, params_override, params_label)
            tasks.append((run_id, item.notebook, params, str(out), chash, force, title))
    if params_override:
        names = set().union(*(_declared(i.notebook) for sc in scenarios for i in sc.notebooks))
        unknown = set(params_override) - names
        if unknown:
            near = {k: difflib.get_close_matches(k, sorted(names), n=1, cutoff=0.6) for k in sorted(unknown)}
            named = [f"{k!r} (did you mean {v[0]!r}?)" if v else repr(k) for k, v in near.items()]
            raise ScenarioError(
                f"{where}: no notebook of these scenarios has parameter{'s' if len(named) > 1 else ''} "
                f"{', '.join(named)}; they have: {', '.join(sorted(names))}"
            )
    if only and not tasks:
        ran = sorted({i.notebook for sc in scenarios for i in sc.notebooks})
        near = difflib.get_close_matches(only, ran, n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ScenarioError(f"--only: no scenario here runs notebook {only!r}{hint}; these run: {', '.join(ran)}")
    # the folder is made once the input is known good (bad input leaves nothing behind); an unwritable
    # folder fails here, before any notebook runs
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=out):
        pass
    results: list[ReportResult | None] = [None] * len(tasks)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # the notebook running (a cluster simulation of 1,000,000 jobs runs minutes in one) and the time so far,
    # redrawn while it runs: a long report shows it is under way
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not progress,
        transient=False,
    ) as bar:
        job = bar.add_task("reports", total=len(tasks))
        # the reports with nothing to redo first, here: no worker process is started for them (none at all
        # on a re-run with nothing to redo); each report's inputs hashed once, here: the digest goes to its run
        digests: list[str | None] = [None] * len(tasks)
        for i, t in enumerate(tasks):
            results[i], digests[i] = _safe_skip(*t, str(cat.root))
            bar.advance(job, int(results[i] is not None))
        todo = [i for i, r in enumerate(results) if r is None]
        if jobs <= 1:
            for i in todo:
                bar.update(job, description=f"reports: {tasks[i][0]}/{tasks[i][1]}")
                results[i] = _safe_run(*tasks[i], digests[i])
                bar.advance(job)
        elif todo:
            # no more workers than reports: a pool forks all of its workers at once on Linux
            workers = min(jobs, len(todo))
            with cf.ProcessPoolExecutor(max_workers=workers) as pool:
                futs = {pool.submit(_safe_run, *tasks[i], digests[i]): i for i in todo}
                left = len(futs)
                bar.update(job, description=f"reports: {left} to run, {workers} at a time")
                for fut in cf.as_completed(futs):
                    results[futs[fut]] = fut.result()
                    left -= 1
                    bar.update(job, advance=1, description=f"reports: {left} to run, {min(workers, left)} at a time")
        bar.update(job, description="reports")
    final = [r for r in results if r is not None]
    write_index(out, final, chash)
    return final


def params_run_name(scenario: Scenario, overrides: dict, label: str | None = None) -> tuple[str, str]:
    """Folder name and title of a scenario run with parameter overrides: ``<scenario>+<label>`` and a title
    that lists the overrides (file paths by their file name), so index.html says what ran."""
    label = label or "params"

    def show(v):
        if isinstance(v, list):
            return "[" + ", ".join(show(x) for x in v) + "]"
        if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) >= 1e6:
            from hnplan.units import format_count

            return format_count(v)  # tokens=1T, not 1000000000000
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return Path(v).name if _looks_like_path(v) else str(v)

    listed = ", ".join(f"{k}={show(v)}" for k, v in overrides.items())
    return f"{scenario.id}+{label}", f"{scenario.id} with {label}: {listed}"


def _safe_skip(
    scenario_id: str,
    notebook: str,
    params: dict,
    out_dir: str,
    catalog_hash: str,
    force: bool,
    title: str = "",
    data_root: str | None = None,
) -> tuple[ReportResult | None, str | None]:
    """:func:`_up_to_date` and the inputs' digest it tested (``data_root``: the catalog's folder, see
    :func:`_inputs_digest`); ``(None, None)`` where either fails (the run then records the failure)."""
    try:
        digest = _inputs_digest(notebook_path(notebook), params, catalog_hash, data_root)
        return _up_to_date(scenario_id, notebook, params, out_dir, catalog_hash, force, title, digest), digest
    except Exception:  # noqa: BLE001
        return None, None


def _safe_run(*args) -> ReportResult:
    try:
        return _run_one(*args)
    except Exception:  # noqa: BLE001
        return ReportResult(
            args[0], args[1], "failed", 0.0, None, traceback.format_exc(limit=3), args[6] if len(args) > 6 else ""
        )


_INDEX = jinja2.Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hnplan reports</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{padding:.35em .8em;border-bottom:1px solid #ddd;text-align:left}
.ok{color:#1a7f37}.failed{color:#cf222e}.skipped{color:#6e7781}pre{white-space:pre-wrap;max-width:60em;font-size:.85em}
</style></head><body>
<h1>hnplan reports</h1>
<p>Generated {{ when }} by hnplan {{ version }}; catalog {{ chash }}.</p>
<p>{{ n_ok }} of {{ rows|length }} reports ok{% if n_failed %}, <span class="failed">{{ n_failed }} failed</span>{% endif %}.</p>
<table id="reports"><thead><tr><th>scenario</th><th>notebook</th><th>status</th><th>run time [s]</th><th>report</th></tr></thead><tbody>
{% for r in rows %}<tr><td><b>{{ r.scenario }}</b>{% if r.title %}<br><small>{{ r.title }}</small>{% endif %}</td><td>{{ r.notebook }}</td><td class="{{ r.status }}">{{ r.status }}</td>
<td>{{ '%.1f'|format(r.seconds) }}</td><td>{% if r.html %}<a href="{{ r.html }}">{{ r.html }}</a>{% endif %}
{% if r.error %}<pre>{{ r.error }}</pre>{% endif %}</td></tr>
{% endfor %}</tbody></table></body></html>
""",
    autoescape=True,
)


def write_index(out_dir: Path, results: list[ReportResult], catalog_hash: str) -> Path:
    """Write ``index.html`` (and ``index.json``) merging these results with earlier ones in the folder."""
    out_dir = Path(out_dir)
    state_path = out_dir / "index.json"
    state = {}
    if state_path.exists():
        try:
            state = {(r["scenario"], r["notebook"]): {"title": "", **r} for r in json.loads(state_path.read_text())}
        except (ValueError, KeyError, TypeError):
            state = {}
    for r in results:
        prev = state.get((r.scenario, r.notebook))
        row = asdict(r)
        if r.status == "failed" and prev and prev.get("html"):
            row["html"] = prev["html"]  # the earlier good report is still there; link it
        state[(r.scenario, r.notebook)] = row
    rows = [state[k] for k in sorted(state)]
    _atomic_write(state_path, json.dumps(rows, indent=1))
    n_failed = sum(r["status"] == "failed" for r in rows)
    html = _INDEX.render(
        rows=rows,
        n_ok=len(rows) - n_failed,
        n_failed=n_failed,
        when=dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        version=__version__,
        chash=catalog_hash,
    )
    path = out_dir / "index.html"
    _atomic_write(path, html)
    return path
