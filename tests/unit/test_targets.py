"""seatkit/doctor/targets.py: a seat's URL, its credentials kept out of what is shown."""

import json

from conftest import PASSWORD

from seatkit.doctor import targets


def test_url_credentials_become_a_header_and_are_never_shown():
    target = targets.of_url(f"http://user:{PASSWORD}@127.0.0.1:9/", "m", None, None)
    assert target.url == "http://127.0.0.1:9" and target.headers["Authorization"].startswith("Basic ")
    assert PASSWORD not in json.dumps(target.conditions) + target.url
