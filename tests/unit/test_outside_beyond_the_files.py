# ruff: noqa: F811  (profile: the fixture of test_outside_check, taken by name)
"""What decides what runs besides the image's files: its PATH, the mounts where they land (also for
an image `seat build` recorded), a container's own env and command, and which lock a build record
may choose. Each case was a way to run other code while the outside check said verified (the fake
engine of test_outside_check)."""

import hashlib

import pytest
from test_outside_check import (  # noqa: F401
    BASE,
    BASE_CONFIG,
    BUILT_FROM,
    CONFIG,
    LOCK,
    PATH,
    SERVE,
    SITE,
    TAG,
    VENV,
    VLLM,
    built,
    engine_with,
    profile,
    running_container,
)

from seatkit.image import outside, vouch
from seatkit.seat import sections
from seatkit.seat.overlay_lock import Lock

RECORDED = "sha256:" + "a" * 64  # the id engine_with gives the image


def with_mount(profile, target, source="/srv/exp"):
    docker = profile.docker.model_copy(
        update={"extra_mounts": [sections.ExtraMount(source=source, target=target)]}
    )
    return profile.model_copy(update={"docker": docker})


@pytest.mark.parametrize("front", ["/opt/tools/bin", "/dev/shm/bin"])
def test_an_image_path_that_is_not_the_bases_is_refused(profile, monkeypatch, front):
    """A new first folder, filled at run time (a mount, or the host's /dev/shm under ipc: host),
    supplies env and vllm while the created container the check reads has none there."""
    config = {**CONFIG, "Env": [f"PATH={front}:{VENV}/bin:{PATH}", *CONFIG["Env"][1:]]}
    engine_with(monkeypatch, built(), config)
    problems = outside.check(profile, TAG, LOCK).problems
    assert any(p.startswith(f"its PATH '{front}:") and "is not the base's" in p for p in problems), problems


def test_a_mount_over_a_folder_of_path_is_refused(profile, monkeypatch):
    engine_with(monkeypatch, built())
    problems = outside.check(with_mount(profile, "/usr/local"), TAG, LOCK).problems
    assert any("it mounts over /usr/local/bin (a folder of PATH" in p for p in problems), problems


def test_an_empty_path_entry_is_refused_the_working_directory_is_unseen(profile, monkeypatch):
    """execvp resolves ./env from the WorkingDir, the engine from /: a mount there ran the server."""
    env = [f"PATH=:{VENV}/bin:{PATH}", "LD_PRELOAD=/usr/lib/libiomp5.so"]
    base_config = {"Env": env, "WorkingDir": "/workspace"}
    config = {**CONFIG, "Env": [*env, f"SEAT_OVERLAY_DIR={VLLM}"], "WorkingDir": "/workspace"}
    engine_with(monkeypatch, built(), config, base_config=base_config)
    problems = outside.check(with_mount(profile, "/workspace/env"), TAG, LOCK).problems
    assert any("holds '', which execvp resolves from the working directory" in p for p in problems)


@pytest.mark.parametrize(
    "links, target",
    [
        ({}, "/multiprocessing"),  # every spawned worker imports it from the working directory
        ({"/data": ("link", str(SITE))}, "/data/zz-hook.pth"),  # a .pth in site-packages, through a link
    ],
)
def test_a_recorded_build_still_judges_where_the_profiles_mounts_land(profile, monkeypatch, links, target):
    """The record vouches for the image `seat build` made, never for the mounts of today's profile."""
    mounted = with_mount(profile, target)
    cwd = {"WorkingDir": ""}
    engine_with(
        monkeypatch,
        built(**links),
        {**CONFIG, **cwd},
        base={**BASE, **links},
        base_config={**BASE_CONFIG, **cwd},
    )
    outside.record(TAG, RECORDED, mounted, LOCK, BUILT_FROM)
    verdict = outside.check(mounted, TAG, LOCK)
    assert "seat build" in verdict.how and not verdict.verified
    assert any(target.rsplit("/", 1)[1] in p for p in verdict.problems), verdict.problems
    with pytest.raises(outside.SeatError, match="does not run the locked overlay"):
        vouch.image_check(mounted, TAG)


@pytest.mark.parametrize(
    "env, said",
    [
        ("TORCHINDUCTOR_CACHE_DIR=/srv/exp", "env.TORCHINDUCTOR_CACHE_DIR: it moves"),
        ("HOME=/srv/exp", "env.HOME: it moves"),
        ("VLLM_SOME_FUTURE_LOADER=/srv/exp/x", "names a file or folder"),
        ("SEAT_SKIP_OVERLAY_CHECK=1", "its start check was skipped"),
        ("VLLM_API_KEY=a/b+c", None),  # a keyed seat's key, any text: neither judged nor printed
    ],
)
def test_a_containers_own_env_is_judged_as_a_profile_would_be(profile, monkeypatch, env, said):
    """Started from an experiment profile that was edited back since: the container says what ran."""
    where = running_container(monkeypatch, mounts=("/models-base", "/cache", "/srv/exp"))
    box = outside.engine.client().by_id[where]
    box.attrs["Config"] = {**CONFIG, "Env": [*CONFIG["Env"], env]}
    problems = outside.check(profile, where, LOCK, is_container=True).problems
    if said is None:
        assert problems == []
    else:
        assert any(p.startswith("the container's env") and said in p for p in problems), problems


NOT_THE_KITS = "the container's command is not the kit's for profile try"
SESSION = ["nsys", "launch", "--session-new=s", "--trace=cuda,nvtx,osrt", "--cuda-graph-trace=node"]
SESSION += ["--sample=none", "--cpuctxsw=none"]
PROFILED = ["nsys", "profile", "--trace=cuda,nvtx,osrt", "--cuda-graph-trace=graph", "--sample=none"]
PROFILED += ["--cpuctxsw=none", "--duration=60", "--wait=primary", "--output=/cache/nsys/x"]
AT = {word: at for at, word in enumerate(SERVE)}


def served(at: str, *words: str, drop: int = 0) -> list[str]:
    """The kit's command with words put in before SERVE's word `at` (and `drop` of its own gone)."""
    return [*SERVE[: AT[at]], *words, *SERVE[AT[at] + drop :]]


@pytest.mark.parametrize(
    "args",
    [
        ["/srv/exp/evil", "serve", "/models-base"],  # another program, from a mount
        ["env", "LD_PRELOAD=/srv/exp/x.so", "vllm", "serve", "/models-base"],
        ["env", "-C", "/srv/exp", "vllm", "serve", "/models-base"],  # the workers' working directory
        ["sh", "-c", "python3 /srv/exp/patch.py; exec vllm serve /models-base"],
        ["env", "-u", "X", "python3", "/srv/exp/patch.py", "vllm", "serve"],
    ],
)
def test_a_container_command_other_than_the_kits_is_refused(profile, monkeypatch, args):
    where = running_container(monkeypatch, args, mounts=("/models-base", "/cache", "/srv/exp"))
    problems = outside.check(profile, where, LOCK, is_container=True).problems
    assert any(p.startswith(NOT_THE_KITS) for p in problems), problems


@pytest.mark.parametrize(
    "args, word, loads",
    [
        ([*SERVE, "--trust_remote_code"], "'--trust_remote_code'", "trust-remote-code"),
        ([*SERVE, "--trust-remote"], "'--trust-remote'", "trust-remote-code"),  # an abbreviation
        ([*SERVE, "--worker-extension-cls=exp.W"], "'--worker-extension-cls=exp.W'", "worker-extension-cls"),
        ([*SERVE, "-cc", '{"backend":"exp.b"}'], "'-cc'", "its backend loads"),  # -cc: compilation-config
        ([*SERVE, "-cc.backend=exp.b"], "'-cc.backend=exp.b'", "its backend loads"),
        ([*SERVE, "-sc", '{"model":"/srv/exp/draft"}'], "'-sc'", None),  # the draft, swapped
        ([*SERVE, "--speculative-config.model", "/srv/exp/draft"], "'--speculative-config.model'", None),
        ([*SERVE, "-tp", "2"], "'-tp'", None),
        (served("--host", "/srv/exp/model"), "'/srv/exp/model'", None),  # a second model folder
        (served("/models-base", "/srv/exp/model", drop=1), "'/srv/exp/model'", None),  # another one
        (served("--port", "--host=0.0.0.0"), "'--host=0.0.0.0'", None),
        (
            ["env", *SESSION[:4], "--env-var=LD_PRELOAD=/srv/exp/x.so", *SESSION[4:], *SERVE[1:]],
            "'--env",
            None,
        ),
        (["env", "-u", "HF_TOKEN", *SERVE[1:]], "'-u'", None),  # the profile unsets nothing
        (served("--host", "--host", "0.0.0.0"), "'--host'", None),
    ],
)
def test_a_word_the_kit_does_not_write_is_refused_however_vllm_reads_it(
    profile, monkeypatch, args, word, loads
):
    """Judged by its --dashed words alone, each of these commands passed: vLLM's underscores and
    abbreviations, `=` forms and short aliases, a second positional, nsys setting the server's
    environment. The kit's own command is the yardstick: any other word is named."""
    where = running_container(monkeypatch, args, mounts=("/models-base", "/cache", "/srv/exp"))
    problems = outside.check(profile, where, LOCK, is_container=True).problems
    assert any(p.startswith(NOT_THE_KITS) and f" is {word}" in p for p in problems), problems
    if loads:
        assert any(p.startswith("the container's command: vllm_args.") and loads in p for p in problems)


@pytest.mark.parametrize(
    "args",
    [
        SERVE,
        served("127.0.0.1", "0.0.0.0", drop=1),  # SEAT_HOST, as its grammar allows
        served("18100", "9000", drop=1),
        ["env", *SESSION, *SERVE[1:]],
        ["env", *PROFILED, *SERVE[1:]],
    ],
)
def test_the_kits_own_commands_pass(profile, monkeypatch, args):
    where = running_container(monkeypatch, args)
    assert outside.check(profile, where, LOCK, is_container=True).problems == []


def test_the_kits_command_unsets_what_the_profile_unsets(profile, monkeypatch):
    docker = profile.docker.model_copy(update={"unset_env": ["HF_TOKEN"]})
    unsetting = profile.model_copy(update={"docker": docker})
    where = running_container(monkeypatch, ["env", "-u", "HF_TOKEN", *SERVE[1:]])
    assert outside.check(unsetting, where, LOCK, is_container=True).problems == []
    assert outside.check(profile, where, LOCK, is_container=True).problems != []


def test_a_build_record_for_another_image_does_not_choose_the_lock(profile, monkeypatch):
    """A stale or copied record under the tag carried another lock: read from outside, the image
    was judged against it, not the kit's, and seat up started it."""
    evil = b"__version__ = '0.32'\nimport os  # not the overlay\n"
    other = Lock(
        LOCK.source, LOCK.commit, LOCK.path, LOCK.tree, {"version.py": hashlib.sha256(evil).hexdigest()}
    )
    engine_with(monkeypatch, built(**{f"{VLLM}/version.py": evil}))
    outside.record(TAG, "sha256:" + "0" * 64, profile, other, BUILT_FROM)  # another image's record
    monkeypatch.setattr(vouch, "load", lambda: LOCK)
    assert outside.lock_for(TAG, LOCK) == LOCK
    with pytest.raises(outside.SeatError, match="does not run the locked overlay"):
        vouch.image_check(profile, TAG)
    outside.record(TAG, RECORDED, profile, other, BUILT_FROM)  # this image's own: its lock counts
    assert outside.lock_for(TAG, LOCK) == other
