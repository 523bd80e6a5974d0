"""A native seat's server takes the launching shell's environment, less the names what_runs.yaml
lists. vLLM reads some 300 VLLM_* names; those below change the weights it runs, its MoE routing
or who may load new weights into it, so an operator's shell with one left exported started a seat
recorded as verified: `seat up` (native.inherited) and the rendered script leave them out."""

import subprocess

import pytest

from seatkit.seat import what_runs
from seatkit.serve.backends import native

LEFT_EXPORTED = {
    "VLLM_SERVER_DEV_MODE": "1",  # /update_weights, /collective_rpc
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1",  # /v1/load_lora_adapter
    "VLLM_MOE_ROUTING_SIMULATION_STRATEGY": "uniform_random",  # no router, simulated experts
    "VLLM_LORA_RESOLVER_HF_REPO_LIST": "someone/adapters",  # adapters fetched by a request's name
}


@pytest.mark.parametrize("name", sorted(LEFT_EXPORTED))
def test_seat_up_gives_a_native_server_none_of_the_shells_names_that_change_its_weights(monkeypatch, name):
    monkeypatch.setenv(name, LEFT_EXPORTED[name])
    assert name not in native.inherited()


@pytest.mark.parametrize("name", sorted(LEFT_EXPORTED))
def test_the_rendered_script_unsets_them_too(name):
    """As serve.sh.j2's loop over the shell's names judges each (case KEPT) ;; REFUSED) unset)."""
    keep, refused = what_runs.shell_patterns()
    probe = f"case {name} in {keep}) echo kept ;; {refused}) echo unset ;; *) echo kept ;; esac"
    said = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert said.strip() == "unset", f"serve/*.sh keeps {name} from the launching shell"
