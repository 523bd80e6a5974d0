"""Hostile servers and hostile names against the bench: truncated streams, foreign identities,
credentials in URLs, control characters, names that try to leave --out, narrow consoles, Ctrl-C."""

import json
import os
import signal
import subprocess
import threading
from http.server import ThreadingHTTPServer

import pytest
from conftest import BIN, REPO

from seatkit.bench import oracle, oracle_server, run, workload
from seatkit.bench.target import Options, Target
from seatkit.doctor import targets
from seatkit.errors import SeatError

PASSWORD = "s3cret-pa55"


class Server:
    """The oracle in a thread, with one fault chosen by the test (a test stand-in, not a seat)."""

    def __init__(self, fault=None, metrics=True):
        self.oracle = Oracle(fault)
        base = oracle_server.handler_for(self.oracle)
        seen = self.auth = []

        class Handler(base):
            def do_GET(self):
                seen.append(self.headers.get("Authorization"))
                if self.path == "/metrics" and not metrics:
                    self._send(404, b"{}")
                else:
                    super().do_GET()

            def do_POST(self):
                seen.append(self.headers.get("Authorization"))
                if fault == "error" and self.path == "/v1/completions":
                    self.rfile.read(int(self.headers["Content-Length"]))
                    self._send(500, b'{"error": "\x1b[31mboom\x1b[0m\x07 \x1b]0;owned\x07"}')
                    return
                super().do_POST()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


class Oracle(oracle.Oracle):
    """`cut`: stops streaming halfway, with no finish reason, while its counters say it finished;
    `short`: finishes ('length') with half the tokens asked for."""

    def __init__(self, fault):
        super().__init__(tokens_per_step=2.0, step_ms=2.0, k=3, prefill_ms=1.0)
        self.fault = fault

    def complete(self, body, write):
        if self.fault == "short":
            return super().complete({**body, "max_tokens": body["max_tokens"] // 2}, write)
        if self.fault != "cut":
            return super().complete(body, write)
        sent = []

        def first_half(data):
            if len(sent) < 4:
                sent.append(data)
                write(data)

        super().complete(body, first_half)


@pytest.fixture
def server(request):
    made = Server(*getattr(request, "param", (None,)))
    yield made
    made.close()


def prose(max_tokens=32):
    return workload.suites(["prose"], max_tokens)[:1]


@pytest.mark.parametrize(
    "server",
    [("cut", True), ("cut", False), ("short", True), ("short", False)],
    indirect=True,
    ids=["cut-metrics", "cut-no-metrics", "short-metrics", "short-no-metrics"],
)
def test_a_truncated_stream_is_recorded_as_such_never_measured_never_blamed(server, tmp_path):
    out = run.RunDir(tmp_path, "cut")
    summary = run.bench(Target(server.url, oracle.MODEL), prose(), Options(0, 2), out)
    records = [json.loads(x) for x in (out.path / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["truncated"] for r in records)
    assert not any(r["exclusive"] for r in records) and summary["suites"] == {}
    assert summary["discarded"] == 0 and len(summary["truncated"]) == 2
    assert all(r["exclusive_problems"] == [] for r in records)  # nobody else is blamed
    why = summary["truncated"][0]
    assert ("without a finish reason" in why) if server.oracle.fault == "cut" else ("16 of 32" in why)
    assert "Streams cut short (recorded, never measured): 2" in (out.path / "report.md").read_text()


def test_whole_streams_are_still_measured(server, tmp_path):
    summary = run.bench(
        Target(server.url, oracle.MODEL), prose(), Options(0, 2), run.RunDir(tmp_path, "whole")
    )
    assert summary["truncated"] == [] and summary["suites"]["prose"]["requests"] == 2


def test_identity_is_proved_before_and_after_each_group(server, tmp_path):
    calls = []

    def verify():
        calls.append(len(calls))
        if len(calls) == 2:
            raise SeatError("another process, not the seat, also listens on port 1", "stop it")

    target = Target(server.url, oracle.MODEL, verify=verify)
    with pytest.raises(SeatError, match="after prose-.*another process, not the seat"):
        run.bench(target, prose(), Options(0, 1), run.RunDir(tmp_path, "who"))
    assert calls == [0, 1]


@pytest.mark.parametrize("name", ["org/model", "../..", "../../etc/x", "/abs/path", ".", "a\nb", "x" * 300])
def test_run_folders_stay_inside_out(tmp_path, name):
    root = tmp_path / "runs"
    path = run.RunDir(root, name).path
    assert path.parent == root and path.is_dir()
    assert "/" not in path.name and "\n" not in path.name and len(path.name) < 120


@pytest.mark.parametrize("under", ["", "sub"])
def test_out_that_is_a_file_is_a_clear_error_not_a_traceback(tmp_path, under):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(SeatError, match=f"cannot make a run folder in {afile}.*") as caught:
        run.RunDir(afile / under if under else afile, "x")
    assert "--out" in caught.value.hint and afile.read_text() == "not a folder"


def test_two_runs_in_the_same_second_get_distinct_folders(tmp_path, monkeypatch):
    class Frozen(run.datetime):
        @classmethod
        def now(cls, tz=None):
            return run.datetime(2026, 1, 1, tzinfo=tz)

    monkeypatch.setattr(run, "datetime", Frozen)
    paths = [run.RunDir(tmp_path, "same").path for _ in range(3)]
    assert len(set(paths)) == 3 and all(p.parent == tmp_path for p in paths)


def test_url_credentials_become_a_header_and_are_never_shown():
    target = targets.of_url(f"http://user:{PASSWORD}@127.0.0.1:9/", "m", None, None)
    assert target.url == "http://127.0.0.1:9" and target.headers["Authorization"].startswith("Basic ")
    assert PASSWORD not in json.dumps(target.conditions) + target.url


def bench_cli(server_url, out, *extra, env=None, **kwargs):
    return subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "--url",
            server_url,
            "--model",
            oracle.MODEL,
            "--suite",
            "prose",
            "--warmups",
            "0",
            "--repeats",
            "2",
            "--max-tokens",
            "32",
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
        **kwargs,
    )


def test_credentials_in_url_are_redacted_everywhere_and_progress_is_plain(server, tmp_path):
    url = server.url.replace("http://", f"http://user:{PASSWORD}@")
    done = bench_cli(url, tmp_path, "--name", "org/../model")
    assert done.returncode == 0, done.stderr
    (folder,) = tmp_path.iterdir()
    written = "".join(
        p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and p.suffix != ".png"
    )
    assert PASSWORD not in written + done.stdout + done.stderr
    assert any(a and a.startswith("Basic ") for a in server.auth)  # and yet the server got them
    # Outside a terminal: one plain line per measured request, on stderr.
    lines = [x for x in done.stderr.splitlines() if x.startswith("bench: prose/")]
    assert len(lines) == 3 * 2 and all("tok/s" in x for x in lines), done.stderr
    # 80 columns: nothing cut, every line fits, the figures whole.
    table = done.stdout.split("discarded (not alone")[0]  # the paths after it are what they are
    assert all(len(x) <= 80 for x in table.splitlines()), done.stdout
    assert "…" not in table and "decode tok/s: " in table, done.stdout
    assert "model" in folder.name and ".." not in folder.name


@pytest.mark.parametrize("server", [("error",)], indirect=True)
def test_a_server_error_is_printed_without_control_characters_and_the_run_folder_named(server, tmp_path):
    done = bench_cli(server.url, tmp_path)
    assert done.returncode == 1
    assert "boom" in done.stderr and "\x1b" not in done.stderr and "\x07" not in done.stderr
    (folder,) = tmp_path.iterdir()
    assert f"partial run kept in {folder}" in done.stderr.replace("\n", "")


def test_ctrl_c_names_the_partial_run_folder(tmp_path):
    slow = Server()
    slow.oracle.step_s = 0.05  # about 0.8 s per request: time to interrupt the second
    try:
        proc = subprocess.Popen(
            [
                str(BIN / "seat"),
                "bench",
                "--url",
                slow.url,
                "--model",
                oracle.MODEL,
                "--suite",
                "prose",
                "--warmups",
                "0",
                "--repeats",
                "50",
                "--max-tokens",
                "32",
                "--out",
                str(tmp_path),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for line in proc.stderr:
            if "tok/s" in line:
                proc.send_signal(signal.SIGINT)
                break
        stderr = proc.stderr.read()
        assert proc.wait(timeout=60) == 130
    finally:
        slow.close()
    (folder,) = tmp_path.iterdir()
    assert f"partial run kept in {folder}" in stderr.replace("\n", "")
    assert (folder / "requests.jsonl").read_text().count("\n") >= 1


def test_parity_diff_prints_model_text_with_rich_markup_literally(tmp_path):
    """A model output holding '[/b]' (code does) ended parity-diff in a rich MarkupError traceback."""
    for side, tail in (("a", "[/b] one"), ("b", "[/b] two")):
        text = "x = y[/b]" + tail
        record = {
            "schema": "seatkit.parity/1",
            "outputs": {"[/code]": {"prompt_sha256": "p", "max_tokens": 8, "text": text, "token_ids": None}},
        }
        (tmp_path / f"{side}.json").write_text(json.dumps(record))
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "parity-diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "[/code]: diverges at token None, character 14" in done.stdout
    assert "A: 'x = y[/b][/b] one'" in done.stdout and "outputs differ" in done.stdout


def test_the_gauge_sampler_is_reachable_from_the_cli(server, tmp_path):
    done = bench_cli(server.url, tmp_path, "--sample-hz", "50", "--max-tokens", "200")
    assert done.returncode == 0, done.stderr
    folder = next(tmp_path.iterdir())
    records = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    assert all(r["gauges"]["hz"] == 50 for r in records) and any(r["gauges"]["samples"] for r in records)


def test_compare_takes_the_card_form_the_help_shows_from_any_folder(tmp_path):
    done = subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "compare",
            "bench/references/paper-pt-r-2026-042#S12-S14-code",
            "bench/references/paper-pt-r-2026-042.yaml#S12-S14-prose",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    assert "acceptance: the text, not the rig" in " ".join(done.stdout.split())
    assert "None" not in done.stdout
    missing = subprocess.run(
        [str(BIN / "seat"), "bench", "compare", "bench/references/nope-card-x", "paper-pt-r-2026-042"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "60"},
    )
    assert missing.returncode != 0 and "bench/references/bench" not in missing.stderr
    assert "nope-card-x.yaml" in missing.stderr  # one line: never split inside the path


@pytest.mark.parametrize("a, b", [("S8-after", "S8-before"), ("S12-S14-code", "S12-S14-prose")])
def test_the_readmes_compare_output_is_what_compare_prints_now(a, b, tmp_path):
    card = "paper-pt-r-2026-042"
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "compare", f"{card}#{a}", f"{card}#{b}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    shown = done.stdout[done.stdout.index("conditions that differ") :]
    shown = "".join(line.rstrip() + "\n" for line in shown.splitlines())  # the table pads its cells
    readme = (REPO / "README.md").read_text()
    assert f"$ seat bench compare {card}#{a} {card}#{b}\n{shown}" in readme
