"""seatkit/serve/client.py and the bench parts that call it (counters, fleet, tokenizer, parity): every
request ends by its deadline and one bad seat never costs the others' results; the kit's oracle server with
its faults switched on."""

import json
import os
import subprocess
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
from conftest import BIN

from seatkit.bench import counters, fleet, oracle, oracle_server, parity, run, tokenizer, workload
from seatkit.bench.target import Options, Target
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.serve import client


class Server:
    """The oracle with one of its faults, served from a thread of this process."""

    def __init__(self, fault=None):
        self.oracle = oracle.Oracle(
            tokens_per_step=2.0, step_ms=2.0, k=3, prefill_ms=1.0, quirks=oracle.Quirks(fault=fault)
        )
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), oracle_server.handler_for(self.oracle))
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def servers():
    made = []

    def make(fault=None):
        made.append(Server(fault))
        return made[-1]

    yield make
    for server in made:
        server.close()


def prose(max_tokens=16):
    return workload.suites(["prose"], max_tokens)[:1]


def test_a_trickling_metrics_scrape_ends_at_its_deadline(servers, monkeypatch):
    monkeypatch.setattr(counters, "SCRAPE_S", 2.0)
    target = Target(servers("trickle-metrics").url, oracle.MODEL)
    start = time.monotonic()
    with pytest.raises(SeatError, match="did not end within its deadline of 2 s"):
        counters.scrape(target)
    assert time.monotonic() - start < 6  # one byte arrives every 5 s: the read timeout never trips


def test_a_stream_that_ignores_max_tokens_is_stopped(servers):
    server = servers("endless")
    start = time.monotonic()
    with pytest.raises(SeatError, match="sent more than the 16 tokens asked for"):
        client.stream(server.url, oracle.MODEL, "hi", 16)
    assert time.monotonic() - start < 10


def test_a_stream_that_never_ends_is_cut_at_its_deadline(servers, monkeypatch):
    server = servers("endless")
    start = time.monotonic()
    with pytest.raises(SeatError, match="did not end within its deadline of 1 s"):
        client.stream(server.url, oracle.MODEL, "hi", 10**9, deadline=1.0)
    assert time.monotonic() - start < 5


def test_the_deadline_is_derived_from_the_suite():
    assert client.allowed_seconds(32) < client.allowed_seconds(4096)
    assert client.allowed_seconds(32, context=32768) > client.allowed_seconds(32) + 60
    assert client.allowed_seconds(1) >= client.FIRST_S


def test_a_fleet_with_bad_seats_fails_their_rows_and_benches_the_later_ones(servers, tmp_path, monkeypatch):
    monkeypatch.setattr(counters, "SCRAPE_S", 2.0)
    good, trickle, listed, endless, last = (
        servers(f) for f in (None, "trickle-metrics", "tokenize-list", "endless", None)
    )
    urls = [s.url for s in (good, trickle, listed, endless, last)]
    start = time.monotonic()
    result, folder = fleet.bench_fleet(
        [targets.of_url(u, oracle.MODEL, None, None) for u in urls],
        oracle.MODEL,
        prose(),
        Options(0, 1),
        tmp_path / "runs",
    )
    assert time.monotonic() - start < 60
    seats = result["seats"]
    assert [s["url"] for s in seats] == urls
    assert seats[0]["figures"] and seats[4]["figures"]
    assert "deadline" in seats[1]["error"]
    assert "more than the 16 tokens" in seats[3]["error"]
    # TGI's list format is understood: that seat benches.
    assert seats[2].get("error") is None and seats[2]["figures"]
    written = json.loads((folder / "fleet.json").read_text())
    assert [s.get("error") for s in written["seats"]] == [s.get("error") for s in seats]
    assert [row[-1] for row in fleet.rows(result)].count("FAILED") == 2


def test_a_tokenize_answer_in_no_known_format_is_a_clear_error(servers, monkeypatch):
    server = servers()
    monkeypatch.setattr(
        client, "fetch", lambda *a, **k: type("A", (), {"ok": True, "json": lambda self: [1, "two"]})()
    )
    with pytest.raises(SeatError, match="answered neither vLLM's"):
        tokenizer.token_hash(Target(server.url, oracle.MODEL), "some text")


def test_an_unexpected_crash_on_one_seat_is_its_failed_row(servers, tmp_path, monkeypatch):
    real = run.bench
    calls = []

    def bench(target, *args, **kwargs):
        calls.append(target.url)
        if len(calls) == 1:
            raise KeyError("boom")
        return real(target, *args, **kwargs)

    monkeypatch.setattr(run, "bench", bench)
    urls = [servers().url, servers().url]
    result, folder = fleet.bench_fleet(
        [targets.of_url(u, oracle.MODEL, None, None) for u in urls],
        oracle.MODEL,
        prose(),
        Options(0, 1),
        tmp_path / "runs",
    )
    assert "KeyError" in result["seats"][0]["error"] and result["seats"][1]["figures"]
    assert json.loads((folder / "fleet.json").read_text())["seats"][1]["figures"]


def test_surrogate_halves_are_joined_and_a_lone_one_kept_escaped(servers):
    done = client.stream(servers("surrogates").url, oracle.MODEL, "hi", 16)
    assert done.text.startswith("\U0001f600 \\udc00 ")
    done.text.encode()  # no lone surrogate left


def test_bench_run_and_parity_record_surrogates_not_crash(servers, tmp_path):
    server = servers("surrogates")
    cli = subprocess.run(
        [
            str(BIN / "seat"),
            "bench",
            "--url",
            server.url,
            "--model",
            oracle.MODEL,
            "--suite",
            "prose",
            "--warmups",
            "0",
            "--repeats",
            "1",
            "--max-tokens",
            "16",
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80", "SEAT_HOME": str(tmp_path)},
    )
    assert cli.returncode == 0, cli.stderr
    assert "Traceback" not in cli.stderr
    target = Target(server.url, oracle.MODEL)
    folder = parity.record(target, prose(), tmp_path / "parity", "s")
    text = json.loads((folder / "parity.json").read_text())["outputs"]
    assert next(iter(text.values()))["text"].startswith("\U0001f600 \\udc00 ")


def raw_server(answer):
    """A server that reads the request, then hands the socket to `answer` (what no real server
    sends: a line or a chunk that never ends, a body faster than the deadline)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def serve():
        while True:
            conn, _ = listener.accept()

            def one(conn=conn):
                conn.recv(65536)
                try:
                    answer(conn)
                except OSError:  # the client hung up: what the test wants
                    pass
                conn.close()

            threading.Thread(target=one, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"


@pytest.mark.parametrize(
    "event", [b"[1, 2]", b'{"choices": ["a"]}', b'{"choices": [{"text": "a"}], "usage": {"x": 1}}']
)
def test_an_event_of_the_wrong_shape_is_a_clear_error(event):
    url = raw_server(lambda conn: conn.sendall(SSE + b"\r\ndata: " + event + b"\n\n"))
    with pytest.raises(SeatError, match="streamed an event that is not a completion's JSON"):
        client.stream(url, oracle.MODEL, "hi", 16, deadline=10.0)


def test_an_endless_error_page_is_not_read_whole():
    def page(conn):
        conn.sendall(b"HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\n")
        while True:
            conn.sendall(b"y" * 65536)

    start = time.monotonic()
    with pytest.raises(SeatError, match="answered 500: y+$"):
        client.stream(raw_server(page), oracle.MODEL, "hi", 16, deadline=30.0)
    assert time.monotonic() - start < 5
