"""A server flag is judged as vLLM's parser reads it (FlexibleArgumentParser over argparse): each
spelling below reached vLLM as a flag the profile's fields own, or one that loads code, while the
profile loaded as verified."""

import pytest
from test_what_runs import EXPERIMENT, error_of, write

from seatkit.seat import profiles, vllm_flags, what_runs


@pytest.mark.parametrize(
    "args, owner",
    [
        ({"host=0.0.0.0": True}, "--host, which server.host sets"),  # --host=0.0.0.0
        ({"hos": "0.0.0.0"}, "--host, which server.host sets"),  # argparse's abbreviation
        ({"port=9000": True}, "--port, which server.port"),
        ({"speculative-config.model": "/srv/exp/draft"}, "--speculative-config, which the speculative"),
        ({'speculative-config={"model":"/srv/exp/draft"}': True}, "--speculative-config"),
        ({"speculative-config.method": "ngram"}, "--speculative-config"),
        ({"spec-model": "/srv/exp/draft"}, "--spec-model, which speculative.draft_model"),
        ({"spec-tokens": 9}, "--spec-tokens"),
        ({"tensor-parallel=8": True}, "--tensor-parallel-size"),
    ],
)
def test_a_flag_the_profiles_fields_own_is_refused_however_spelled(tmp_path, args, owner):
    """argparse keeps the last of a flag, and vLLM gathers `--speculative-config.model X` into a
    second --speculative-config after the kit's: the draft swapped past the models lock."""
    (flag,) = args
    for extra in ({}, {"experiment": EXPERIMENT}):  # owned, experiment or not
        message = error_of(write(tmp_path, {"vllm_args": args, **extra}))
        assert f"vllm_args.{flag} is {owner}" in message and "own fields" in message, message


@pytest.mark.parametrize(
    "flag, value, loads",
    [
        ("trust_remote_code", True, "trust-remote-code"),  # vLLM makes _ a dash
        ("worker_extension_cls=exp.W", True, "worker-extension-cls"),
        ("tool_parser_plugin", "/srv/exp/p.py", "tool-parser-plugin"),
        ("compilation_config.backend", "exp.b", "its backend"),
        ("compilation-config.inductor-passes+", "exp.p", "its inductor_passes"),
        ("distributed_executor_backend", "exp.E", "a class imported by name"),
        ("ec-transfer-config", {"ec_connector_module_path": "exp.c"}, "its ec_connector_module_path"),
    ],
)
def test_a_loading_flag_is_refused_in_vllms_own_spellings(flag, value, loads):
    found = what_runs.refused_args({flag: value})
    assert len(found) == 1 and found[0].startswith(f"vllm_args.{flag}: ") and loads in found[0], found


def test_an_encoder_cache_connector_module_is_refused_not_a_crash(tmp_path):
    """ec-transfer-config sat among the named values: a mapping for it raised TypeError."""
    message = error_of(
        write(tmp_path, {"vllm_args": {"ec-transfer-config": {"ec_connector_module_path": "x"}}})
    )
    assert "its ec_connector_module_path loads an encoder-cache connector module" in message


@pytest.mark.parametrize(
    "config, said",
    [
        ({"draft_model_config": {"model": "/srv/exp/draft"}}, "draft_model_config: it loads"),
        ({"draft-load-config": {"load_format": "exp"}}, "draft-load-config: it loads"),
        ({"code_revision": "other"}, "code_revision: it loads"),
    ],
)
def test_speculative_config_keys_that_name_other_draft_weights_or_code_are_refused(tmp_path, config, said):
    spec = {"speculative": {"method": "ngram", "num_speculative_tokens": 2, "config": config}}
    message = error_of(write(tmp_path, spec))
    assert f"speculative.config.{said}" in message, message
    assert profiles.load(str(write(tmp_path, {**spec, "experiment": EXPERIMENT})))


@pytest.mark.parametrize("key", ["num-speculative-tokens", "model"])
def test_speculative_config_may_not_repeat_a_field_in_dashes_either(tmp_path, key):
    spec = {"method": "ngram", "num_speculative_tokens": 2, "config": {key: 9}}
    assert "config repeats" in error_of(write(tmp_path, {"speculative": spec}))


@pytest.mark.parametrize(
    "flag", ["reasoning-parser", "max-model-len", "no-enable-prefix-caching", "hf-token"]
)
def test_real_flags_beside_the_owned_and_refused_ones_are_fine(flag):
    assert what_runs.owned_args({flag: "x"}) == [] and what_runs.refused_args({flag: "x"}) == []


def test_a_flag_reads_as_vllm_reads_it():
    assert vllm_flags.read("speculative_config.draft-load-config.x+=1") == vllm_flags.Flag(
        "speculative-config", "draft_load_config", "1"
    )
    assert vllm_flags.resolved("trust", ["trust-remote-code"]) == "trust-remote-code"
    assert vllm_flags.resolved("reasoning-parser", ["reasoning-parser-plugin"], ["reasoning-parser"]) is None


@pytest.mark.parametrize("value", ["--trust-remote-code", "--host=0.0.0.0", "-sc", "-O3"])
def test_a_value_vllm_would_read_as_a_flag_is_refused(tmp_path, value):
    """--hf-token takes its value only when one follows: `--hf-token --trust-remote-code` ran the
    model's own code (vLLM 0.32's parser: hf_token True, trust_remote_code True)."""
    for extra in ({}, {"experiment": EXPERIMENT}):
        message = error_of(write(tmp_path, {"vllm_args": {"hf-token": value}, **extra}))
        assert f"vllm_args.hf-token: its value {value!r} reads as a flag of its own" in message, message


@pytest.mark.parametrize("value", [-1, "-1", -0.5, "fp8", "a-b"])
def test_a_negative_number_or_plain_value_is_no_flag(value):
    assert what_runs.owned_args({"some-number": value}) == []


@pytest.mark.parametrize(
    "args, said",
    [
        ({"model-class-overrides": {"LlamaForCausalLM": "exp.m:Model"}}, "the model's class, imported"),
        ({"model-class-over": {"Llama": "exp.m:Model"}}, "the model's class, imported"),
        ({"logging-config": {"pylogging_config_file": "/srv/exp/log.json"}}, "dictConfig"),
        ({"logging-config.pylogging-config-file": "/srv/exp/log.json"}, "dictConfig"),
        ({"hf-config-path": "/srv/exp/config"}, "configuration from another folder"),
        ({"tokenizer": "/srv/exp/tok"}, "a tokenizer from another folder"),
        ({"lora-modules": "x=/srv/exp/lora"}, "adapter weights"),
    ],
)
def test_flags_that_swap_the_models_class_config_tokenizer_or_adapters_are_refused(tmp_path, args, said):
    """Each named code or files past the models lock in a verified seat (vLLM 0.32's flags)."""
    message = error_of(write(tmp_path, {"vllm_args": args}))
    assert said in message and "executes or imports" in message, message
    assert profiles.load(str(write(tmp_path, {"vllm_args": args, "experiment": EXPERIMENT})))


@pytest.mark.parametrize("flag", ["tokenizer-mode", "logging-config"])
def test_their_neighbours_are_fine(flag):
    assert what_runs.refused_args({flag: "auto" if flag == "tokenizer-mode" else {"log_level": "info"}}) == []
