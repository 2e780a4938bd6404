"""Lazy sub-commands (issue 16): the root help imports no planner, a sub-command imports only its own
module, and every ``hnplan/cli/<name>_cmd.py`` registers the sub-command ``<name>`` with the help the
root lists for it."""

import subprocess
import sys

import pytest
import typer.main

from hnplan.cli import app, command_modules
from hnplan.cli._app import _help_from_source, unwrap_help

PROBE = """
import sys
from typer.testing import CliRunner
from hnplan.cli import app
res = CliRunner().invoke(app, {argv!r})
assert res.exit_code == 0, res.output
print(",".join(sorted(m for m in sys.modules if m.startswith(("hnplan", "pandas", "scipy", "networkx", "plotly")))))
"""


def _modules_after(argv):
    out = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


def test_root_help_imports_no_sub_command():
    mods = _modules_after(["--help"])
    assert not any(m.endswith("_cmd") for m in mods)
    assert not {"pandas", "scipy", "networkx", "plotly", "hnplan.planning"} & mods


def test_a_sub_command_imports_only_its_module():
    mods = _modules_after(["tco", "--help"])
    assert {m for m in mods if m.endswith("_cmd")} == {"hnplan.cli.tco_cmd"}
    assert "hnplan.planning.training" not in mods


@pytest.mark.parametrize("name,module", sorted(command_modules().items()))
def test_module_registers_its_command_with_the_listed_help(name, module):
    real = typer.main.get_command(app).commands.get(name)
    if real is None:  # not yet imported in this process
        __import__(module)
        real = typer.main.get_command(app).commands[name]
    assert real.name == name
    first = unwrap_help(real.help or "").split("\n\n")[0]
    assert first == _help_from_source(module, name).split("\n\n")[0]


def test_help_paragraphs_are_wrapped_by_the_terminal_not_the_docstring():
    """A docstring's line breaks inside a paragraph are joined (typer's rich mode keeps them, so
    '--help' and the root's list broke sentences where the source wrapped)."""
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["calibrate", "--help"], env={"COLUMNS": "200"})
    text = res.output
    assert res.exit_code == 0 and "the answer says which were kept and why" in text
    root = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "250"}).output
    assert "the verdict computed from the planners' numbers" in root


def test_units_in_option_help_are_printed():
    """'[tokens]' in an option's help is a unit, not rich markup: it reaches the screen."""
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "sequence length [tokens]" in res.output
    res = CliRunner().invoke(app, ["infer", "--help"], env={"COLUMNS": "200"})
    assert "request rate to serve [requests/s]" in res.output
