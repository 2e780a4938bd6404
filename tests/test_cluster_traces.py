"""Training-cluster trace loaders (Helios, Acme, Philly): what is kept, the derived columns, format detection,
a replay on a small cluster and one-line errors.

The files are written here in the exact format of each trace's README (the three Helios rows and the
Seren and Kalos rows and the first Philly job are the README's own examples; the others are hand-written to cover CPU jobs,
multi-node jobs, jobs cancelled before they started and non-terminal states). No trace rows are
committed under data/traces for these formats."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hnplan import units
from hnplan.cli import app
from hnplan.cluster import read_acme, read_helios, read_philly, read_trace, simulate_cluster
from hnplan.errors import InputError

HELIOS_HEAD = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
HELIOS = HELIOS_HEAD + (
    # the HeliosData README example (Venus)
    "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n"
    "1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n"
    "1425513,uzqls,vcpDC,1,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0\n"
    # hand-written: a CPU job, a 2-node job, a job cancelled in the queue, a suspended job
    "1425514,uA,vcA,0,8,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 18:52:00,600,0\n"
    "1425515,uB,vcA,16,64,2,COMPLETED,2020-06-09 18:43:00,2020-06-09 18:50:00,2020-06-09 20:50:00,7200,420\n"
    "1425516,uC,vcB,8,32,1,CANCELLED,2020-06-09 18:44:00,,,0,0\n"
    "1425517,uD,vcB,2,4,1,SUSPENDED,2020-06-09 18:45:00,2020-06-09 18:45:00,2020-06-09 18:55:00,600,0\n"
)
SEREN = (
    "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time\n"
    # the AcmeTrace README example (Seren)
    "5778432,u5907,1,8,128,Other,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,"
    "2023-03-01 00:20:51+08:00,117,32,936.0\n"
    "5778469,u5907,1,8,128,Other,COMPLETED,2023-03-01 00:23:58+08:00,2023-03-01 00:24:11+08:00,"
    "2023-03-01 01:09:04+08:00,2693,13,21544.0\n"
    # hand-written: pretraining on 4 nodes, SFT, evaluation, a CPU debug job
    "5778500,u1,4,32,512,Pretrain,COMPLETED,2023-03-01 00:30:00+08:00,2023-03-01 00:30:10+08:00,"
    "2023-03-01 10:30:10+08:00,36000,10,1152000.0\n"
    "5778501,u2,1,8,128,SFT,CANCELLED,2023-03-01 00:31:00+08:00,2023-03-01 00:31:00+08:00,"
    "2023-03-01 01:31:00+08:00,3600,0,28800.0\n"
    "5778502,u3,1,1,16,Eval,COMPLETED,2023-03-01 00:32:00+08:00,2023-03-01 00:32:00+08:00,"
    "2023-03-01 00:42:00+08:00,600,0,600.0\n"
    "5778503,u3,1,0,16,Debug,COMPLETED,2023-03-01 00:33:00+08:00,2023-03-01 00:33:00+08:00,"
    "2023-03-01 00:34:00+08:00,60,0,0.0\n"
)
KALOS = (
    "job_id,user,node_num,gpu_num,cpu_num,mem_per_pod_GB,shared_mem_per_pod,type,state,submit_time,start_time,"
    "end_time,fail_time,stop_time,duration,queue,gpu_time\n"
    # the AcmeTrace README example (Kalos)
    "dlctk696s0jbvitv,uf794,8,64,960,1000,100.0,Other,FAILED,2023-05-17 11:00:58+00:00,2023-05-17 11:01:08+00:00,"
    "2023-05-17 11:01:16+00:00,2023-05-17 11:01:16+00:00,,18,10.0,1152.0\n"
    "dlc1t2ypl09b8qtp,uf794,8,64,960,1000,100.0,Other,CANCELLED,2023-05-17 11:28:42+00:00,2023-05-17 11:28:54+00:00,"
    "2023-05-17 11:30:04+00:00,,2023-05-17 11:30:04+00:00,82,12.0,5248.0\n"
)


def _attempt(start, end, servers):
    return {"start_time": start, "end_time": end, "detail": [{"ip": f"m{i}", "gpus": g} for i, g in enumerate(servers)]}


EIGHT = [f"gpu{i}" for i in range(8)]
PHILLY = [
    # the philly-traces README example
    {
        "status": "Pass",
        "vc": "ee9e8c",
        "jobid": "application_1506638472019_14199",
        "attempts": [
            _attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", [EIGHT]),
            _attempt("2017-10-07 01:13:30", "2017-10-09 06:53:12", [EIGHT]),
        ],
        "submitted_time": "2017-10-07 01:11:39",
        "user": "ce2f4c",
    },
    # hand-written: a 2-server job, a job never scheduled, a job still running, a 2-GPU job
    {
        "status": "Failed",
        "vc": "v",
        "jobid": "b",
        "submitted_time": "2017-10-07 01:20:00",
        "user": "u",
        "attempts": [_attempt("2017-10-07 01:25:00", "2017-10-07 02:25:00", [EIGHT, EIGHT])],
    },
    {"status": "Pass", "vc": "v", "jobid": "c", "submitted_time": "2017-10-07 01:30:00", "user": "u", "attempts": []},
    {
        "status": "Killed",
        "vc": "v",
        "jobid": "d",
        "submitted_time": "2017-10-07 01:40:00",
        "user": "u",
        "attempts": [_attempt("2017-10-07 01:41:00", None, [EIGHT])],
    },
    {
        "status": "Killed",
        "vc": "v",
        "jobid": "e",
        "submitted_time": "2017-10-07 01:50:00",
        "user": "u",
        "attempts": [_attempt("2017-10-07 01:50:30", "2017-10-07 01:55:30", [["gpu0", "gpu1"]])],
    },
]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_helios_keeps_gpu_jobs_that_ran(tmp_path):
    jobs = read_helios(_write(tmp_path, "cluster_log.csv", HELIOS))
    # kept: 511, 512, 513 (every terminal state) and 515; dropped: the CPU job 514, 516 cancelled
    # before it started (duration 0) and the suspended 517
    # arrivals after 18:41:01: +26 s, +27 s, 18:43:00 -> +119 s
    assert jobs["arrival_s"].tolist() == [0.0, 26.0, 27.0, 119.0]
    assert jobs["gpus"].tolist() == [1, 4, 1, 16]
    assert jobs["duration_s"].tolist() == [36848.0, 249.0, 675233.0, 7200.0]
    # the 16-GPU job runs on 2 nodes: 8 GPUs per node stay in one server
    assert jobs["tp"].tolist() == [1, 4, 1, 8]
    assert (jobs["gpu_milli"] == 1000).all() and set(jobs["cls"]) == {"training"}
    # the trace records no checkpoints: training jobs get the reader's default period of one hour
    assert (jobs["checkpoint_s"] == 3600.0).all()
    done = read_helios(tmp_path / "cluster_log.csv", states=["completed"], cls="development")
    assert done["gpus"].tolist() == [1, 16] and np.isinf(done["checkpoint_s"]).all()
    # None keeps every state, the suspended job too
    assert len(read_helios(tmp_path / "cluster_log.csv", states=None)) == 5


def test_acme_types_to_classes(tmp_path):
    jobs = read_acme(_write(tmp_path, "trace_seren.csv", SEREN))
    # 00:18:22 -> 00:23:58 is 336 s; 00:30:00 is 698 s; the CPU debug job is left out
    assert jobs["arrival_s"].tolist() == [0.0, 336.0, 698.0, 758.0, 818.0]
    assert jobs["cls"].tolist() == ["development", "development", "training", "fine-tuning", "development"]
    assert jobs["tp"].tolist() == [8, 8, 8, 8, 1]
    assert jobs["checkpoint_s"].tolist() == [np.inf, np.inf, 3600.0, 3600.0, np.inf]
    kalos = read_trace(_write(tmp_path, "trace_kalos.csv", KALOS))
    # 11:00:58 -> 11:28:42 is 1,664 s; 64 GPUs on 8 nodes
    assert kalos["arrival_s"].tolist() == [0.0, 1664.0]
    assert kalos["duration_s"].tolist() == [18.0, 82.0] and kalos["tp"].tolist() == [8, 8]


def test_philly_job_log(tmp_path):
    p = _write(tmp_path, "cluster_job_log", json.dumps(PHILLY, indent=4))
    jobs = read_trace(p)
    # the README job: first start 10-07 01:12:09 to last end 10-09 06:53:12 = 2 d 5 h 41 min 3 s
    assert jobs["duration_s"].tolist() == [2 * units.DAY + 5 * units.HOUR + 41 * 60 + 3, 3600.0, 300.0]
    # never scheduled ("c") and still running ("d") are left out; arrivals after 01:11:39
    assert jobs["arrival_s"].tolist() == [0.0, 501.0, 2301.0]
    assert jobs["gpus"].tolist() == [8, 16, 2] and jobs["tp"].tolist() == [8, 8, 2]
    assert set(jobs["cls"]) == {"training"}
    assert read_philly(p, states=["Pass"])["gpus"].tolist() == [8]
    bad = [dict(PHILLY[0], submitted_time="07/10/2017")]
    with pytest.raises(InputError, match="submitted_time must be YYYY-MM-DD HH:MM:SS; got '07/10/2017'"):
        read_philly(_write(tmp_path, "b.json", json.dumps(bad)))
    with pytest.raises(InputError, match=r"lacks key\(s\) attempts"):
        read_philly(_write(tmp_path, "c.json", json.dumps([{"jobid": 1, "status": "Pass", "submitted_time": ""}])))
    with pytest.raises(InputError, match="JSON list of jobs"):
        read_philly(_write(tmp_path, "d.json", json.dumps(PHILLY[0])))
    with pytest.raises(InputError, match="not a JSON file"):
        read_philly(_write(tmp_path, "e.json", "[{"))
    with pytest.raises(InputError, match="no finished GPU job"):
        read_philly(_write(tmp_path, "f.json", json.dumps(PHILLY[2:4])))
    with pytest.raises(InputError, match="states must be among"):
        read_philly(p, states=["COMPLETED"])


def test_read_trace_detects_the_format(tmp_path):
    assert read_trace(_write(tmp_path, "a.csv", SEREN))["cls"].iloc[2] == "training"
    h = read_trace(_write(tmp_path, "h.csv", HELIOS))
    assert h.equals(read_helios(tmp_path / "h.csv"))


def test_replay_on_a_small_cluster(tmp_path):
    """The Seren file on 16 H100s (two 8-GPU servers): the 32-GPU pretraining job can never fit and is
    rejected; the others run, the first on an empty cluster without waiting."""
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 16, trace=_write(tmp_path, "s.csv", SEREN), failures=False, policy="best-fit"
    )
    jobs = r.summary["jobs"]
    assert jobs["done"] == 4 and jobs["rejected"] == 1
    rej = r.jobs[r.jobs["status"] == "rejected"]
    assert rej["gpus"].tolist() == [32]
    assert r.jobs.sort_values("arrival_s")["queue_delay_s"].iloc[0] == 0.0
    r = simulate_cluster(
        "hgx-h100-ib-ndr", 32, trace=_write(tmp_path, "h.csv", HELIOS), failures=False, policy="best-fit"
    )
    assert r.summary["jobs"]["done"] == 4
    p = _write(tmp_path, "cluster_job_log", json.dumps(PHILLY))
    r = simulate_cluster("hgx-h100-ib-ndr", 16, trace=p, failures=False, policy="topology-aware")
    assert r.summary["jobs"]["done"] == 3


def test_cli_simulates_a_helios_log(tmp_path):
    p = _write(tmp_path, "cluster_log.csv", HELIOS)
    args = ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "32", "--trace", str(p), "--json"]
    r = CliRunner().invoke(app, [*args, "--no-failures"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["jobs"]["done"] == 4
    bad = _write(tmp_path, "bad.csv", HELIOS.replace(",2020-06-09 18:41:27,", ",yesterday,"))
    r = CliRunner().invoke(
        app, ["cluster", "simulate", "--system", "hgx-h100-ib-ndr", "--gpus", "32", "--trace", str(bad)]
    )
    assert r.exit_code == 2 and "submit_time" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize(
    ("text", "call", "match"),
    [
        (HELIOS.replace(",duration,", ",runtime,"), read_helios, r"missing column\(s\) duration of the Helios"),
        (SEREN.replace(",type,", ",kind,"), read_acme, r"missing column\(s\) type of the Acme"),
        (
            HELIOS.replace(",4,16,1,FAILED", ",four,16,1,FAILED"),
            read_helios,
            r"t.csv: row 3, column gpu_num: .* has 'four'",
        ),
        (HELIOS.replace(",249,0", ",-249,0"), read_helios, "row 3, column duration: must be a number >= 0; has -249$"),
        (
            HELIOS.replace(",2020-06-09 18:41:27,", ",yesterday,"),
            read_helios,
            "row 3, column submit_time: .* 'yesterday'",
        ),
        (SEREN.replace(",SFT,", ",RLHF,"), read_acme, "row 5, column type: must be one of .* 'RLHF'"),
        (HELIOS_HEAD + "1,u,vc,0,4,1,COMPLETED,2020-06-09 18:41:01,,,60,0\n", read_helios, "no GPU job"),
    ],
)
def test_bad_trace_files(tmp_path, text, call, match):
    p = _write(tmp_path, "t.csv", text)
    with pytest.raises(InputError, match=match) as e:
        call(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_bad_arguments(tmp_path):
    p = _write(tmp_path, "t.csv", HELIOS)
    with pytest.raises(InputError, match="states must be among"):
        read_helios(p, states=["PENDING"])
    with pytest.raises(InputError, match="class must be one of"):
        read_helios(p, cls="batch")
    with pytest.raises(InputError, match="not found"):
        read_acme(tmp_path / "missing.csv")


def test_every_csv_trace_reader_refuses_alike(tmp_path):
    """openb and the Slurm logs read their CSV through one function: the same one-line errors for a missing
    file, a file that is not CSV and a missing column."""
    from hnplan.cluster.jobs import read_openb, read_trace_csv

    missing = tmp_path / "none.csv"
    for reader in (read_openb, read_helios, lambda p: read_trace_csv(p, ("a",), "test")):
        with pytest.raises(InputError, match="trace file .* not found"):
            reader(missing)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not a CSV file"):
        read_trace_csv(bad, ("a",), "test")
    ok = tmp_path / "ok.csv"
    ok.write_text("a,b\n1,2\n")
    assert list(read_trace_csv(ok, ("a",), "test")["b"]) == [2]
    with pytest.raises(InputError, match=r"missing column\(s\) c of the test format"):
        read_trace_csv(ok, ("c",), "test")


def test_a_trace_csv_is_read_once_and_its_rows_keep_their_lines(tmp_path, monkeypatch):
    """The CSV was read twice, by pandas and again line by line to number the rows for errors; now its bytes
    are read once and both come from them. Rows keep the lines a spreadsheet shows (header row 1) past comment
    and blank lines and any line end (CRLF, a lone CR); without either, row i is on line i + 2."""
    import builtins
    import io

    from hnplan.cluster.trace_csv import read_trace_csv

    f = tmp_path / "t.csv"
    # lines: 1 comment, 2 header, 3 blank, 4 a row (CRLF), 5 a comment (lone CR), 6 a row
    f.write_bytes(b"# exported by hand\narrival_s,gpus\n\n0,1\r\n# a note\r5,2\n")
    opened: list[str] = []
    real = io.open

    def spy(file, *args, **kw):
        opened.append(str(file))
        return real(file, *args, **kw)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)
    raw = read_trace_csv(f, ("gpus",), "test")
    assert opened.count(str(f)) == 1
    assert (raw.index + 2).tolist() == [4, 6] and raw["gpus"].tolist() == [1, 2]
    f.write_bytes(b"arrival_s,gpus\r\n0,1\r\n5,2\r\n")
    assert (read_trace_csv(f, ("gpus",), "test").index + 2).tolist() == [2, 3]


def test_comment_lines_and_spaces_around_cells_are_read_alike(tmp_path):
    """A trace's CSV took `` 8 `` as 8 but refused `` training `` as a class, and a ``#`` line above the header
    was read as the header ("missing column(s)"). Comment lines are skipped wherever they are, spaces around a
    text cell and a header name are dropped as around a number, and a row named in an error is still the file's."""
    head = "arrival_s,gpus,gpu_milli,duration_s,cls,checkpoint_s,tp\n"
    plain = head + "0,8,1000,3600,training,3600,8\n10,4,1000,600,inference,0,4\n"
    spaced = (
        "# a cluster's jobs, exported by hand\n"
        "arrival_s, gpus ,gpu_milli,duration_s, cls ,checkpoint_s,tp\n"
        "0, 8 ,1000,3600, training ,3600,8\n"
        "# the serving replica\n"
        "10,4,1000,600,inference ,0,4\n"
    )
    want = read_trace(_write(tmp_path, "plain.csv", plain))
    got = read_trace(_write(tmp_path, "spaced.csv", spaced))
    assert got.reset_index(drop=True).equals(want.reset_index(drop=True))
    assert got["cls"].tolist() == ["training", "inference"]
    # a bad cell below a comment line: its row as a spreadsheet shows the file (the header row 2 here)
    bad = _write(tmp_path, "bad.csv", spaced.replace("inference ,", "serving,"))
    with pytest.raises(InputError, match=r"row 5, column cls: .*'serving'"):
        read_trace(bad)
    # the Slurm logs as well: a comment above Helios's header, a state with spaces
    helios = _write(tmp_path, "h.csv", "# Venus\n" + HELIOS.replace(",FAILED,", ", FAILED ,"))
    assert len(read_helios(helios)) == len(read_helios(_write(tmp_path, "h0.csv", HELIOS)))
    bad = _write(tmp_path, "hb.csv", "# Venus\n" + HELIOS.replace(",249,0", ",-249,0"))
    with pytest.raises(InputError, match="row 4, column duration: must be a number >= 0; has -249$"):
        read_helios(bad)
