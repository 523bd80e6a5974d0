"""Profile validation: every class of bad field is named with the file, the field and what was expected."""

import pytest
import yaml

from seatkit.errors import SeatError
from seatkit.seat import profiles, what_runs


def write(tmp_path, name, data, base="cpu-smoke"):
    """A profile extending a shipped one, with `data` overriding its fields."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"extends": base, **data}))
    return path


def error_of(path) -> str:
    with pytest.raises(SeatError) as caught:
        profiles.load(str(path))
    return caught.value.message


@pytest.mark.parametrize("name", profiles.profile_names())
def test_shipped_profiles_load(name):
    loaded = profiles.load(name)
    assert loaded.name == name and len(loaded.sha256) == 64


@pytest.mark.parametrize(
    "data, field, expected",
    [
        ({"server": {"port": "9406"}}, "server.port", "valid integer"),
        ({"server": {"colour": "blue"}}, "server.colour", "unknown field"),
        ({"gpus": {"count": 4, "tensor_parallel_size": 3}}, "gpus", "does not divide"),
        (
            {"speculative": {"num_speculative_tokens": 0}},
            "speculative.num_speculative_tokens",
            "greater than or equal to 1",
        ),
        (
            {"speculative": {"num_speculative_tokens": 17}},
            "speculative.num_speculative_tokens",
            "less than or equal to 16",
        ),
        (
            {"models": {"base": {"build": None, "host_dir": "models/tiny"}}},
            "models.base.host_dir",
            "must be an absolute path",
        ),
        ({"runtime": "podman"}, "runtime", "'docker' or 'native'"),
        ({"server": {"port": 70000}}, "server.port", "less than or equal to 65535"),
        ({"vllm_args": {"--dtype": "bf16"}}, "vllm_args.--dtype", "without its leading dashes"),
        ({"vllm_args": {"port": 1}}, "(top level)", "the profile's own fields"),
        ({"env": {"BAD NAME": "1"}}, "env.BAD NAME", "environment variable name"),
        ({"env": {"SEAT_HOST": "0.0.0.0"}}, "(top level)", "the kit's own knobs"),
        ({"env": {"SEAT_OVERLAY_DIR": "/tmp"}}, "(top level)", "the kit's own knobs"),
        ({"model": "draft"}, "(top level)", "not one of models"),
        ({"server": {"reserved_ports": [18000]}}, "server", "reserved_ports"),
        (
            {"speculative": {"config": {"dspark_sts_temperatures": [1.0, 1.1]}}},
            "speculative",
            "one temperature per draft position",
        ),
        (
            {"image": {"name": "x", "tag": "y", "digest": "sha256:abc"}},
            "image.digest",
            "should match pattern",
        ),
    ],
)
def test_bad_field_is_named(tmp_path, data, field, expected):
    message = error_of(write(tmp_path, "bad", data))
    assert str(tmp_path / "bad.yaml") in message
    assert f"field '{field}'" in message
    assert expected in message


def test_docker_runtime_needs_image_and_mounts(tmp_path):
    message = error_of(write(tmp_path, "docker", {"runtime": "docker"}))
    assert "runtime docker needs image and docker" in message


def test_every_error_is_listed_not_only_the_first(tmp_path):
    message = error_of(write(tmp_path, "two", {"server": {"port": "x", "host": 5}}))
    assert "field 'server.port'" in message and "field 'server.host'" in message


def test_not_yaml_and_not_a_mapping(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("server: [unclosed\n")
    assert "not valid YAML" in error_of(broken)
    listed = tmp_path / "listed.yaml"
    listed.write_text("- a\n- b\n")
    assert "a mapping of fields (name: value lines), got a list" in error_of(listed)


def test_missing_profile_lists_known_ones():
    with pytest.raises(SeatError) as caught:
        profiles.load("no-such-seat")
    assert "cpu-smoke" in caught.value.hint


def test_extends_loop_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b\n")
    (tmp_path / "b.yaml").write_text("extends: a\n")
    assert "loops back" in error_of(tmp_path / "a.yaml")


def test_a_local_copy_named_like_a_kit_profile_extends_the_kits_own(tmp_path):
    """An operator's cpu-smoke-k3.yaml that extends cpu-smoke-k3 takes the kit's, not itself."""
    (tmp_path / "cpu-smoke-k3.yaml").write_text("extends: cpu-smoke-k3\nserver: {port: 18777}\n")
    local = profiles.load(str(tmp_path / "cpu-smoke-k3.yaml"))
    assert local.name == "cpu-smoke-k3" and local.server.port == 18777
    assert local.speculative.num_speculative_tokens == 3  # the kit's variant, merged under it
    (tmp_path / "selfish.yaml").write_text("extends: selfish\n")  # no kit profile of that name
    assert "no profile at" in error_of(tmp_path / "selfish.yaml")


def test_variant_overrides_a_few_fields_and_keeps_the_rest():
    base, variant = profiles.load("cpu-smoke"), profiles.load("cpu-smoke-k3")
    assert variant.speculative.num_speculative_tokens == 3
    assert variant.speculative.config == base.speculative.config  # merged, not replaced
    assert variant.vllm_args == base.vllm_args and variant.sha256 != base.sha256


def test_variant_of_the_default_seat_with_tp2(tmp_path):
    path = write(
        tmp_path,
        "tp2",
        {"gpus": {"count": 2, "tensor_parallel_size": 2}, "env": {"CUDA_VISIBLE_DEVICES": "0,1"}},
        base="dsv4-flash-dspark-tp4",
    )
    loaded = profiles.load(str(path))
    assert loaded.gpus.tensor_parallel_size == 2 and loaded.name == "tp2"
    assert loaded.env["CUTE_DSL_ARCH"] == "sm_120a"


def test_default_seat_is_the_original():
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    assert (seat.image.name, seat.image.tag) == (
        "voipmonitor/vllm",
        "chthonic-consecration-f1190eab-b12x0ff2847-pr20-cu132",
    )
    assert seat.gpus.tensor_parallel_size == 4
    assert seat.speculative.method == "dspark" and seat.speculative.num_speculative_tokens == 5
    assert seat.speculative.config["draft_sample_method"] == "probabilistic"
    assert seat.vllm_args["kv-cache-dtype"] == "fp8" and seat.vllm_args["block-size"] == 256
    assert seat.vllm_args["max-model-len"] == 393216
    assert seat.vllm_args["gpu-memory-utilization"] == 0.89
    assert seat.vllm_args["attention-backend"] == "B12X_MLA_SPARSE"
    assert seat.env["NCCL_P2P_LEVEL"] == "SYS" and seat.server.host == "127.0.0.1"
    assert all(m.mount for m in seat.models.values())


def test_profile_paths_that_cannot_be_read_are_clear_errors(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(tmp_path / "loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to(loop)
    (tmp_path / "file").write_text("")
    for path, said in (
        (tmp_path / "file" / "x.yaml", "no profile at"),
        (tmp_path / ("a" * 300 + ".yaml"), "cannot read this profile"),
        (loop, "cannot resolve the path"),
    ):
        with pytest.raises(SeatError, match=said):
            profiles.load(str(path))


def test_a_variant_that_switches_runtime_may_keep_the_other_runtime_s_section(tmp_path):
    # As before the split: the inherited section is validated and kept, never a reason to refuse.
    docker = profiles.load(
        str(
            write(
                tmp_path,
                "to-docker",
                {
                    "runtime": "docker",
                    "image": {"name": "seatkit-local/vllm-cpu", "tag": "t"},
                    "models": {"base": {"build": None, "host_dir": "/tmp/m", "mount": "/models-base"}},
                    "docker": {"container_name": "seatkit-x", "gpus": [], "network": "host"},
                },
            )
        )
    )
    assert isinstance(docker, profiles.DockerProfile) and docker.native is not None
    native_section = {"python": "python3.11", "venv": "x", "packages": ["vllm"]}
    native = profiles.load(
        str(
            write(
                tmp_path,
                "to-native",
                {"runtime": "native", "native": native_section},
                base="to-docker",
            )
        )
    )
    assert isinstance(native, profiles.NativeProfile) and native.docker is not None


def test_a_native_profile_s_docker_section_is_still_checked(tmp_path):
    docker = {"container_name": "seatkit-x", "gpus": [], "network": "host", "extra_env": {"PYTHONPATH": "/x"}}
    profile = profiles.load(str(write(tmp_path, "bad", {"docker": docker})))
    assert what_runs.off_list(profile) == ["docker.extra_env.PYTHONPATH"]
