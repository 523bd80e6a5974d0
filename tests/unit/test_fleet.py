"""The fleet verdict: the median seat is the fleet's figure; a seat beyond the seats' spread is named
with the factor that moved and what usually moves it."""

import os
import subprocess

import pytest
from conftest import BIN

from seatkit.bench import aggregate, fleet
from seatkit.bench.target import Options
from seatkit.doctor import targets
from seatkit.errors import SeatError


def seat_of(url, tokens_per_step, ms_per_step, cv=0.03):
    tok_s = tokens_per_step / ms_per_step * 1000
    figures = {
        "decode_tok_s": {"median": tok_s, "cv": cv},
        "tokens_per_step": {"median": tokens_per_step, "cv": 0.0},
        "ms_per_step": {"median": ms_per_step, "cv": cv},
    }
    return {"url": url, "seat": url[-1], "figures": {"code": figures}}


def verdicts(seats):
    return {v["seat"]: v for v in fleet.judge(seats)}


def test_a_seat_with_a_slower_step_is_named_by_step_time():
    found = verdicts(
        [
            seat_of("s1", 3.0, 10.0),
            seat_of("s2", 3.0, 10.3),
            seat_of("s3", 3.0, 14.0),
            seat_of("s4", 3.0, 9.8),
        ]
    )
    assert found["s3"]["outside"] and found["s3"]["moved"] == ["decode_tok_s", "ms_per_step"]
    assert "ms per step +" in found["s3"]["text"] and "host settings" in found["s3"]["text"]
    assert "100% of the tok/s gap" in found["s3"]["text"]
    assert not any(found[s]["outside"] for s in ("s1", "s2", "s4"))
    assert found["s1"]["text"] == "within the fleet's spread"


def test_a_seat_with_fewer_tokens_per_step_is_named_by_acceptance():
    found = verdicts([seat_of("s1", 5.7, 8.0), seat_of("s2", 3.9, 8.0), seat_of("s3", 5.7, 8.1)])
    assert found["s2"]["outside"] and "tokens_per_step" in found["s2"]["moved"]
    assert "image, model revision or draft config" in found["s2"]["text"]
    assert not found["s1"]["outside"] and not found["s3"]["outside"]


def test_a_noisy_seat_is_judged_against_its_own_spread():
    """A 12 % slower step is within noise when the seats' step times vary by 10 % per request."""
    found = verdicts(
        [seat_of("s1", 3.0, 10.0, 0.10), seat_of("s2", 3.0, 11.2, 0.10), seat_of("s3", 3.0, 10.1, 0.10)]
    )
    assert not any(v["outside"] for v in found.values())


def test_both_factors_are_named_when_both_moved():
    found = verdicts([seat_of("s1", 5.0, 8.0), seat_of("s2", 4.0, 10.0), seat_of("s3", 5.0, 8.1)])
    text = found["s2"]["text"]
    assert "tokens per step" in text and "ms per step" in text


def test_two_seats_are_only_shown_side_by_side():
    found = verdicts([seat_of("s1", 5.7, 8.0), seat_of("s2", 3.9, 8.0)])
    assert not any(v["outside"] for v in found.values())
    assert all("3 or more seats" in v["text"] for v in found.values())


def test_rows_fit_and_flag():
    seats = [seat_of("s1", 5.7, 8.0), seat_of("s2", 3.9, 8.0), seat_of("s3", 5.7, 8.1)]
    result = {"seats": seats, "verdicts": fleet.judge(seats)}
    rows = {row[0]: row for row in fleet.rows(result)}
    assert rows["2 s2"][-1] == "OUTSIDE" and rows["1 s1"][-1] == "ok"
    assert "| 2 s2 | code | " in fleet.markdown(result)


def test_urls_are_kept_and_service_names_expand_to_one_seat_per_address():
    assert fleet.seat_urls(["http://127.0.0.1:9406/", "https://a.example:1"]) == [
        "http://127.0.0.1:9406",
        "https://a.example:1",
    ]
    # A name resolves through the system resolver, as a headless Service's does in a cluster.
    assert fleet.seat_urls(["127.0.0.1:9406"]) == ["http://127.0.0.1:9406"]
    assert fleet.seat_urls(["http://127.0.0.1:1", "http://127.0.0.1:1"]) == ["http://127.0.0.1:1"]
    # The same seat with and without its credentials is still one seat, not two of a fleet.
    assert fleet.seat_urls(["http://u:p@127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:1/"]) == [
        "http://u:p@127.0.0.1:1",
        "http://127.0.0.1:2",
    ]


@pytest.mark.parametrize(
    "bad, message",
    [
        ("ftp://h/x", "not an http"),
        ("justaname", "HOST:PORT"),
        ("h:0", "HOST:PORT"),
        ("h:99999", "HOST:PORT"),
        ("no-such-host.invalid:80", "does not resolve"),
    ],
)
def test_bad_seat_addresses_get_a_clear_error(bad, message):
    with pytest.raises(SeatError, match=message):
        fleet.seat_urls([bad])


def test_the_cli_reports_a_bad_address_without_a_traceback():
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "fleet", "no-such-host.invalid:80"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "does not resolve" in done.stderr
    assert "Traceback" not in done.stderr


def test_seats_without_spec_decode_counters_are_shown_not_a_crash():
    """Seats with no /metrics counters have tok/s only: nothing to judge, each still gets its row."""

    def tok_s_only(url):
        return {
            "url": url,
            "seat": url[-1],
            "figures": {"code": {"decode_tok_s": {"median": 20.0, "cv": 0.01}}},
        }

    seats = [tok_s_only("s1"), tok_s_only("s2"), tok_s_only("s3")]
    result = {"seats": seats, "verdicts": fleet.judge(seats)}
    assert result["verdicts"] == []
    assert [row[-1] for row in fleet.rows(result)] == ["n/a"] * 3


def test_a_seat_with_no_measured_request_keeps_its_row():
    """A seat whose every request was truncated or skipped has no figures; the table still lists it."""
    seats = [seat_of("s1", 3.0, 10.0), seat_of("s2", 3.0, 10.1), {"url": "s3", "seat": "3", "figures": {}}]
    rows = fleet.rows({"seats": seats, "verdicts": fleet.judge(seats)})
    assert [row[0] for row in rows] == ["1 s1", "2 s2", "3 s3"]
    assert rows[-1][1:] == ("none", "n/a", "n/a", "n/a", "n/a")


def test_a_dual_stack_name_gives_each_seat_once(monkeypatch):
    """A dual-stack headless Service lists each pod once per family: two seats, not four."""
    import socket

    answer = [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::ffff:127.0.0.5", 9406, 0, 0)),
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::ffff:127.0.0.6", 9406, 0, 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.5", 9406)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.6", 9406)),
    ]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: answer)
    assert fleet.seat_urls(["seats.ns.svc:9406"]) == [
        "http://[::ffff:127.0.0.5]:9406",
        "http://[::ffff:127.0.0.6]:9406",
    ]


def test_seats_serving_different_models_are_refused_before_any_bench(tmp_path):
    """Tok/s of two different models is no fleet spread: refused up front, nothing benched."""
    import http.server
    import json
    import threading

    def seat_serving(model):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps({"data": [{"id": model}]}).encode()
                self.send_response(200 if self.path == "/v1/models" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    servers = [seat_serving("tiny"), seat_serving("tiny"), seat_serving("other")]
    try:
        urls = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
        with pytest.raises(SeatError, match=f"different models: .*{urls[2]} serves other"):
            fleet.bench_fleet(
                [targets.of_url(u, "", None, None) for u in urls], None, [], None, tmp_path / "runs"
            )
        assert not (tmp_path / "runs").exists()
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_a_seat_urls_credentials_stay_out_of_the_fleet_report(tmp_path):
    """http://user:password@seat is sent as a header; the table, fleet.json and fleet.md show the
    seat without it, as `seat bench --url` does."""
    import base64

    from conftest import PASSWORD, Server, prose

    from seatkit.bench import oracle

    server = Server()
    try:
        url = server.url.replace("http://", f"http://ops:{PASSWORD}@")
        result, folder = fleet.bench_fleet(
            [targets.of_url(url, oracle.MODEL, None, None)],
            oracle.MODEL,
            prose(),
            Options(0, 1),
            tmp_path / "runs",
        )
        assert result["seats"][0]["url"] == server.url
        assert "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode() in server.auth
        for written in ("fleet.json", "fleet.md"):
            assert PASSWORD not in (folder / written).read_text()
        assert all(PASSWORD not in cell for row in fleet.rows(result) for cell in row)
    finally:
        server.close()


def test_a_seat_down_mid_fleet_is_reported_and_the_others_kept(tmp_path):
    """A node that stops answering fails its own row; the seats benched before and after it stay."""
    from conftest import Server, prose

    from seatkit.bench import oracle

    servers = [Server(), Server()]
    gone = Server()
    gone.close()  # nothing listens there any more
    try:
        urls = [servers[0].url, gone.url, servers[1].url]
        result, folder = fleet.bench_fleet(
            [targets.of_url(u, oracle.MODEL, None, None) for u in urls],
            oracle.MODEL,
            prose(),
            Options(0, 1),
            tmp_path / "runs",
        )
        assert [s["url"] for s in result["seats"]] == urls
        assert "cannot read" in result["seats"][1]["error"]
        assert result["seats"][0]["figures"] and result["seats"][2]["figures"]
        rows = fleet.rows(result)
        assert rows[1][0] == f"2 {gone.url}" and rows[1][-1] == "FAILED"
        assert f"seat {gone.url}: failed: cannot read" in (folder / "fleet.md").read_text()
        done = subprocess.run(
            [
                str(BIN / "seat"),
                "bench",
                "fleet",
                *urls,
                "--model",
                oracle.MODEL,
                "--suite",
                "prose",
                "--warmups",
                "0",
                "--repeats",
                "1",
                "--max-tokens",
                "32",
                "--out",
                str(tmp_path / "cli"),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "80", "SEAT_HOME": str(tmp_path)},
        )
        assert done.returncode == 1 and "some seats failed" in done.stderr
        assert "FAILED" in done.stdout and "Traceback" not in done.stderr
    finally:
        for server in servers:
            server.close()


def test_a_seat_measured_once_is_not_judged_against_a_spread_taken_as_zero():
    """One request per seat (`seat bench fleet --repeats 1` on a one-prompt suite) gives each
    factor one value, whose spread is unknown (aggregate.stats: cv None), not zero. Reproduction:
    three such seats, one 5 % slower per step; fleet._figures turns the unknown spread into 0.0,
    so the 2 % floor alone names the slow seat OUTSIDE and the others 'within the fleet's spread',
    a judgment no measured spread supports."""

    def summary(ms_per_step):
        one = {
            "decode_tok_s": aggregate.stats([3.0 / ms_per_step * 1000]),
            "tokens_per_step": aggregate.stats([3.0]),
            "ms_per_step": aggregate.stats([ms_per_step]),
        }
        return {"suites": {"code": one}}

    seats = [
        {"url": f"s{i}", "seat": i, "figures": fleet._figures(summary(ms))}
        for i, ms in enumerate((10.0, 10.1, 10.5), 1)
    ]
    for verdict in fleet.judge(seats):
        assert not verdict["outside"], verdict["text"]
        assert verdict["text"] != "within the fleet's spread"
