"""Ctrl-C during ``hnplan report`` and the notebook kernel's own output: one line, exit 130, no
traceback (ours or the kernel's), no report lost, no kernel left running."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.cli._app import EXIT_INTERRUPTED

pytestmark = pytest.mark.notebook
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(
    model="llama3.1-8b",
    systems=["gb200-nvl72", "hgx-h100-ib-ndr"],
    gpus=144,
    tokens=1.0e11,
    seq_len=4096,
    global_batch_tokens=4096 * 288,
)


def _scenario(tmp_path) -> str:
    path = tmp_path / "small.yaml"
    path.write_text(
        yaml.safe_dump(
            {"id": "small", "name": "small", "notebooks": [{"notebook": "design_comparison", "parameters": SMALL}]}
        )
    )
    return str(path)


def test_interrupt_inside_the_runner_is_one_line_and_keeps_the_report(tmp_path, monkeypatch):
    import papermill

    out = tmp_path / "reports"
    (out / "small").mkdir(parents=True)
    html = out / "small" / "design_comparison.html"
    html.write_text("the earlier good report")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    res = runner.invoke(app, ["report", "--scenario", _scenario(tmp_path), "--out", str(out)])
    assert res.exit_code == EXIT_INTERRUPTED == 130
    assert res.stderr.strip() == "interrupted: stopped by Ctrl-C"
    assert html.read_text() == "the earlier good report"
    assert not list((out / "small").glob(".design_comparison.run.*"))  # the run's temp folder is gone


def test_kernel_output_goes_to_its_log_not_the_terminal(tmp_path, capfd):
    from jupyter_client.manager import AsyncKernelManager
    from nbclient.util import run_sync

    from hnplan.reports import KERNEL_ARGS, quiet_kernel_manager

    log = tmp_path / "kernel.log"
    km = quiet_kernel_manager(log)(kernel_name="python3")
    assert isinstance(km, AsyncKernelManager)
    run_sync(km.start_kernel)(extra_arguments=KERNEL_ARGS)
    try:
        kc = km.client()
        kc.start_channels()
        run_sync(kc.wait_for_ready)(timeout=60)
        # what the kernel process writes to its own file descriptors 1 and 2 (as IPKernelApp's
        # warnings and a ZMQError traceback at Ctrl-C do)
        run_sync(kc.execute_interactive)(
            "import os; os.write(2, b'kernel stderr line\\n'); os.write(1, b'kernel stdout line\\n')", timeout=60
        )
        kc.stop_channels()
    finally:
        run_sync(km.shutdown_kernel)(now=True)
    seen = capfd.readouterr()
    assert "kernel stderr line" not in seen.err + seen.out and "kernel stdout line" not in seen.err + seen.out
    text = log.read_text()
    assert "kernel stderr line" in text and "kernel stdout line" in text


def _kernels_of(pid: int) -> list[str]:
    """Command lines of ipykernel processes whose parent is ``pid`` (JPY_PARENT_PID is set for them)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "ipykernel" in cmd and f"JPY_PARENT_PID={pid}".encode() in env:
            found.append(cmd)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and signals a process group")
def test_ctrl_c_during_a_notebook_is_clean(tmp_path):
    # a terminal's Ctrl-C: SIGINT to the CLI's whole process group while a notebook executes (its
    # kernel process is running)
    out = tmp_path / "reports"
    scenario = _scenario(tmp_path)
    cmd = [sys.executable, "-m", "hnplan", "report", "--scenario", scenario, "--out", str(out), "--force"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not _kernels_of(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline, "the notebook never started"
        time.sleep(0.05)
    time.sleep(1.0)
    kernels = _kernels_of(proc.pid)
    assert list(out.glob("small/.design_comparison.run.*/*.kernel.log"))  # what the kernel prints goes there
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    assert stderr.strip() == "interrupted: stopped by Ctrl-C", stderr
    for noise in ("Traceback", "ZMQError", "IPKernelApp", "KeyboardInterrupt"):
        assert noise not in stdout + stderr
    assert kernels, "no kernel was running when the interrupt came"
    time.sleep(1.0)
    assert not _kernels_of(proc.pid)  # the kernel went with the run
    assert not list(out.glob("small/.design_comparison.run.*"))
