# ruff: noqa: F811  (kit, seat: the fixtures of test_run_record_mark, taken by name)
"""Every request to a seat goes to the seat itself, whatever proxy the launching shell names
(http_proxy, HTTP_PROXY, ALL_PROXY; no_proxy often lists localhost but not 127.0.0.1): through a
proxy, completions, counters and timings would come from whatever answers there, labelled with the
seat's profile (review3 #5). The bench's client, `seat up`'s wait, `seat status` and doctor all
make their requests with client.fetch / client.stream."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import Server
from test_run_record_mark import kit, seat, up_as_this_process  # noqa: F401

from seatkit.bench import oracle
from seatkit.doctor import server
from seatkit.serve import client, identity, launch
from seatkit.serve.deadline import Deadline

NAMES = ["http_proxy", "HTTP_PROXY", "ALL_PROXY"]


@pytest.fixture
def proxy():
    """A 'proxy' that answers every request itself, with a model list of its own."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            seen.append(self.path)
            body = json.dumps({"object": "list", "data": [{"id": "not-the-seat"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_address[1]}", seen
    http.shutdown()
    http.server_close()


def shell_proxy(monkeypatch, name: str, address: str) -> None:
    for other in ("no_proxy", "NO_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, address)
    monkeypatch.setenv("no_proxy", "localhost")  # as many managed hosts set it: not 127.0.0.1


@pytest.mark.parametrize("name", NAMES)
def test_the_bench_talks_to_the_seat_itself_whatever_proxy_the_shell_names(proxy, monkeypatch, name):
    address, seen = proxy
    shell_proxy(monkeypatch, name, address)
    seat = Server()
    try:
        answer = client.fetch("GET", f"{seat.url}/v1/models", 5)
        done = client.stream(seat.url, oracle.MODEL, "hello", 8)
    finally:
        seat.close()
    assert seen == [], f"the bench's request went to the proxy {address}: {seen}"
    assert [m["id"] for m in answer.json()["data"]] == [oracle.MODEL]
    assert done.completion_tokens == 8 and done.finish_reason == "length"


@pytest.mark.parametrize("name", NAMES)
def test_seat_up_status_and_doctor_talk_to_the_seat_itself(kit, seat, proxy, monkeypatch, name):
    address, seen = proxy
    shell_proxy(monkeypatch, name, address)
    run = up_as_this_process("plain", seat.url)
    monkeypatch.setattr(launch, "who_listens", lambda run: identity.OURS)  # not what this test is about
    assert launch.wait_ready(run, 10, lambda stage, waited: None) < 10  # the seat lists its model
    info = launch.status("plain")
    assert info["health"] == 200 and info["models"] == [oracle.MODEL]
    assert json.loads(server._get(run, "/v1/models"))["data"][0]["id"] == oracle.MODEL
    assert seen == [], f"a request to the seat went to the proxy {address}: {seen}"


@pytest.mark.parametrize("name", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_the_shells_ca_bundle_still_counts_for_an_https_seat(monkeypatch, name):
    """Only the proxy is refused from the environment: an https --url seat behind a private CA
    is verified with the bundle the shell names, as requests would without the kit."""
    for other in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "/srv/private-ca.pem")
    assert Deadline(5).session().verify == "/srv/private-ca.pem"
    monkeypatch.delenv(name)
    assert Deadline(5).session().verify is True
