"""Reports open in a real browser: headless Chromium (Debian's package) driven by playwright opens
index.html and one report of each notebook, and checks there is no JavaScript error, every plotly
chart rendered (an svg in each chart div) and the key table is present, and that the first screen
(1280 x 900 CSS pixels, a laptop's browser window) shows the verdict ("What this means") and the start of the
key table, in that order, before any chart. Screenshots are saved (to $HNPLAN_SCREENSHOTS, default the
test's temporary folder).

Skipped when Chromium is not installed, unless HNPLAN_REQUIRE_BROWSER=1 (as in CI), then it fails.
"""

import os
import shutil
from pathlib import Path

import pytest
import yaml

from hnplan.reports import load_scenarios, run_reports

from nbparams import NOTEBOOKS, small_params

pytestmark = pytest.mark.notebook

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        if os.environ.get("HNPLAN_REQUIRE_BROWSER") == "1":
            pytest.fail("Chromium is required (HNPLAN_REQUIRE_BROWSER=1) but not installed: apt-get install chromium")
        pytest.skip("Chromium not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    sc = tmp / "browser.yaml"
    sc.write_text(
        yaml.safe_dump(
            {
                "id": "browser",
                "name": "every notebook on small parameters",
                "notebooks": [{"notebook": name, "parameters": small_params(name)} for name in NOTEBOOKS],
            }
        )
    )
    out = tmp / "reports"
    results = run_reports(load_scenarios(str(sc)), out, jobs=2, progress=False)
    assert [r.status for r in results] == ["ok"] * len(results), [r.error for r in results]
    return out


def _open(browser, path: Path, shots: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{path.parent.name}-{path.stem}.png"), full_page=True)
    return page, errors


def _shots(tmp_path):
    return Path(os.environ.get("HNPLAN_SCREENSHOTS", tmp_path / "screenshots"))


def test_index_opens_and_links_every_report(browser, reports, tmp_path):
    page, errors = _open(browser, reports / "index.html", _shots(tmp_path))
    assert errors == []
    assert page.locator("#reports tbody tr").count() == len(NOTEBOOKS)
    assert page.locator("td.ok").count() == len(NOTEBOOKS)
    page.close()


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_report_renders_charts_and_table(browser, reports, notebook, tmp_path):
    page, errors = _open(browser, reports / "browser" / f"{notebook}.html", _shots(tmp_path))
    assert errors == [], errors
    charts = page.locator("div.plotly-graph-div")
    assert charts.count() >= 1
    page.wait_for_function(
        "() => [...document.querySelectorAll('div.plotly-graph-div')].every(d => d.querySelector('svg.main-svg'))",
        timeout=15000,
    )
    assert page.locator("#key-table").count() == 1
    assert page.get_by_text("What this means").count() >= 1  # every report explains its numbers
    first = first_screen(page)
    assert first["verdict"] is not None, "no 'What this means' heading"
    # positions from the top of the page, so the check does not depend on scrolling or on the window's chrome
    assert first["verdict"] < first["height"], f"the verdict starts below the first screen: {first}"
    assert first["table"] < first["height"], f"the key table starts below the first screen: {first}"
    assert first["verdict"] < first["table"], f"the key table comes before the verdict: {first}"
    assert first["chart"] is None or first["table"] < first["chart"], f"a chart comes before the key table: {first}"
    page.close()


_FIRST_SCREEN_JS = """() => {
  const top = e => e ? e.getBoundingClientRect().top + window.scrollY : null;
  const heads = [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')];
  const verdict = heads.find(e => e.textContent.trim().toLowerCase().startsWith('what this means'));
  return {verdict: top(verdict), table: top(document.getElementById('key-table')),
          chart: top(document.querySelector('div.plotly-graph-div')), height: window.innerHeight};
}"""


def first_screen(page) -> dict:
    """Top edges [CSS px from the top of the page] of the verdict heading, the key table and the first chart,
    and the window's height."""
    page.evaluate("() => window.scrollTo(0, 0)")
    return page.evaluate(_FIRST_SCREEN_JS)
