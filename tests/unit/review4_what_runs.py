"""review4: profiles the kit loads as verified (no experiment) whose seat serves from code or
weights on another machine, which no overlay check, image check or models lock sees."""

import pytest

from seatkit.errors import SeatError
from seatkit.seat import profiles, what_runs


def load(tmp_path, body: str):
    path = tmp_path / "r4.yaml"
    path.write_text("extends: cpu-smoke-docker\n" + body)
    return profiles.load(str(path))


def test_data_parallel_engines_of_another_machine_pass_as_verified(tmp_path):
    """vLLM's multi-node data parallel (internal load balancing): the seat's API server hands
    requests to engine cores that connect from other nodes (`vllm serve ... --headless
    --data-parallel-start-rank 1 --data-parallel-address SEAT`), each running its own install
    and its own model folder. Half of the bench's requests (all, with --data-parallel-size-local 0)
    are served by code and weights nothing checked; the profile loads as verified."""
    body = (
        "vllm_args:\n"
        "  data-parallel-size: 2\n"
        "  data-parallel-size-local: 1\n"
        "  data-parallel-address: 10.0.0.1\n"
        "  data-parallel-rpc-port: 13345\n"
    )
    with pytest.raises((SeatError, ValueError)):
        load(tmp_path, body)


def test_ray_backend_with_ray_address_of_another_cluster_passes_as_verified(tmp_path):
    """ray is one of distributed-executor-backend's allowed values; ray.init() (vLLM passes no
    address) joins the cluster RAY_ADDRESS names, and the model's workers run on that cluster's
    nodes, in their Python, on their copy of the model folder. RAY_ADDRESS is no path (no '/'), so
    the env rules let it through."""
    assert what_runs.env_reason("RAY_ADDRESS") is None
    body = "vllm_args:\n  distributed-executor-backend: ray\nenv:\n  VLLM_CACHE_ROOT: /cache/vllm\n  RAY_ADDRESS: 10.0.0.5:6379\n"
    with pytest.raises((SeatError, ValueError)):
        load(tmp_path, body)
