"""vLLM 0.32 settings that change what a seat runs without touching its code: its weights, its
model's config, its accept/reject rule, its sampling defaults, its expert router (found by the
third hostile review). A verified profile is refused them; an experiment may, and is marked."""

import pytest
import yaml

from seatkit.errors import SeatError
from seatkit.seat import profiles, what_runs


def load(tmp_path, data, base="cpu-smollm2"):
    path = tmp_path / "try.yaml"
    path.write_text(yaml.safe_dump({"extends": base, **data}))
    return profiles.load(str(path))


def assert_refused(tmp_path, data, base="cpu-smollm2"):
    """Refused as it stands; accepted, and marked, once it is an experiment."""
    with pytest.raises(SeatError, match="change what the seat executes or imports"):
        load(tmp_path, data, base)
    reason = {"unverified": True, "reason": "trying it"}
    assert what_runs.conditions(load(tmp_path, {**data, "experiment": reason}, base)) == {
        "unverified": "trying it"
    }


# 1. The acceptance numbers themselves: vLLM 0.32's synthetic rejection sampler accepts draft
# tokens at a rate the profile names, whatever the target model says (vllm/config/speculative.py,
# v1/sample/rejection_sampler.py). A "verified" seat then reports an acceptance and a tokens/s
# that its weights never earned.
@pytest.mark.parametrize(
    "config",
    [
        {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 5.5},
        {"rejection-sample-method": "synthetic", "synthetic-acceptance-rates": [0.9, 0.8, 0.7, 0.6, 0.5]},
    ],
)
def test_a_synthetic_acceptance_rule_is_an_experiment(tmp_path, config):
    assert_refused(tmp_path, {"speculative": {"config": config}})


# 2. The locked weights read under another model configuration: hf-overrides is what the refused
# --hf-config-path does, inline (num_hidden_layers: 1 runs one layer of the locked checkpoint).
@pytest.mark.parametrize(
    "args",
    [
        {"hf-overrides": {"num_hidden_layers": 1}},
        {"hf-overrides": '{"architectures": ["MistralForCausalLM"]}'},
        {"hf-over": {"num_hidden_layers": 1}},  # argparse's abbreviation
    ],
)
def test_overriding_the_locked_models_config_is_an_experiment(tmp_path, args):
    assert_refused(tmp_path, {"vllm_args": args})


# 3. Other weights than the locked files: a loader that reads elsewhere (tensorizer's URI), or
# none at all (dummy: random weights) for a profile whose lock pins real weight files.
@pytest.mark.parametrize(
    "args",
    [
        {"load-format": "dummy"},
        {
            "load-format": "tensorizer",
            "model-loader-extra-config": {"tensorizer_uri": "/srv/other/model.tensors"},
        },
    ],
)
def test_a_loader_that_reads_other_weights_than_the_locked_files_is_an_experiment(tmp_path, args):
    assert_refused(tmp_path, {"vllm_args": args})


# 4. Weights swapped while it runs: VLLM_SERVER_DEV_MODE registers /update_weights,
# /collective_rpc and the RL routes (vllm/entrypoints/launchers/api_server/routers.py);
# VLLM_ALLOW_RUNTIME_LORA_UPDATING registers /v1/load_lora_adapter (serve/lora/api_router.py);
# --weight-transfer-config sets up the engine that receives new weights. Any client of a
# "verified" seat could then load other weights into it.
@pytest.mark.parametrize(
    "data",
    [
        {"env": {"VLLM_SERVER_DEV_MODE": "1"}},
        {"env": {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}, "vllm_args": {"enable-lora": True}},
        {"vllm_args": {"weight-transfer-config": {"backend": "nccl"}}},
    ],
)
def test_what_lets_a_client_load_other_weights_into_the_running_seat_is_an_experiment(tmp_path, data):
    assert_refused(tmp_path, data)


# 5. The locked MoE weights, routed by a simulator instead of the model's router: every fused MoE
# layer takes RoutingSimulatorRouter when the name is set (fused_moe/router/router_factory.py), so
# the default seat (DeepSeek-V4-Flash, MoE) computes other outputs at another step time.
def test_simulated_moe_routing_is_an_experiment(tmp_path):
    assert_refused(tmp_path, {"env": {"VLLM_MOE_ROUTING_SIMULATION_STRATEGY": "uniform_random"}})


# 6. The locked generation_config.json set aside: vLLM takes the defaults a request leaves unset
# (repetition_penalty, top_k, min_p: the bench sets temperature, top_p and seed alone) from
# --generation-config's folder, or from --override-generation-config, instead of the locked file.
@pytest.mark.parametrize(
    "args",
    [
        {"generation-config": "/srv/other-defaults"},
        {"override-generation-config": {"repetition_penalty": 1.3}},
    ],
)
def test_sampling_defaults_from_elsewhere_than_the_locked_model_are_an_experiment(tmp_path, args):
    assert_refused(tmp_path, {"vllm_args": args})


# 7. Other model code, or adapter weights, than the locked overlay's and models': --model-impl
# transformers runs transformers' modeling code for the model instead of vLLM's (the overlay's
# b12x model files for the default seat); --default-mm-loras loads adapter weights from a path,
# as the refused --lora-modules does.
@pytest.mark.parametrize(
    "args",
    [
        {"model-impl": "transformers"},
        {"enable-lora": True, "default-mm-loras": {"image": "/srv/adapter"}},
    ],
)
def test_other_model_code_or_adapters_than_the_locked_ones_are_an_experiment(tmp_path, args):
    assert_refused(tmp_path, {"vllm_args": args})
