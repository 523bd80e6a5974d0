"""A container's own command against the one the kit builds for the profile
(seatkit.serve.spec.container_argv): `env -u NAME ... [nsys profile|launch --FLAG...] vllm serve
MODEL --flag ...`, its knobs' values as their grammars allow. Any other word is refused: vLLM reads
`--trust_remote_code`, `--flag=value`, abbreviations and short aliases (-cc, -sc), nsys sets the
server's environment (--env-var=LD_PRELOAD=...), and a word more can name another model folder, so
judging some words alone misses what the rest do. What the command's flags load is named beside.
"""

from __future__ import annotations

import re

from seatkit.seat import what_runs
from seatkit.seat.profiles import Profile
from seatkit.serve import spec
from seatkit.serve.words import Ref, Word


def judged(args: list[str], profile: Profile) -> list[str]:
    """What differs between a container's command and the kit's for the profile (none: it is one
    of the kit's, with or without an nsys wrap), and what its unset names and server flags change
    of what runs, as the profile would be refused them."""
    launch = spec.build(profile)
    unset = [w for n in launch.unset_env for w in (("-u",), (n,))]
    forms = [[("env",), *unset, *wrap, *launch.command] for wrap in [[], *launch.wraps.values()]]
    knobs = {k.name: k.pattern for k in launch.knobs}
    if any(_fits(args, form, knobs) for form in forms):
        return []
    form = max(forms, key=lambda f: _agreed(args, f, knobs))
    at = _agreed(args, form, knobs)
    got = repr(args[at]) if at < len(args) else "nothing"
    want = _shown(form[at]) if at < len(form) else "nothing more"
    problems = [
        f"the container's command is not the kit's for profile {profile.name} (`env [-u NAME]... "
        f"[nsys profile|launch --FLAG...] vllm serve MODEL --flag ...`, as seat up builds it): "
        f"word {at} is {got} where the kit's is {want}"
    ]
    return problems + [f"the container's command: {line}" for line in _loads(args)]


def _word(word: Word, knobs: dict[str, str | None]) -> str:
    """A word of the kit's as a regular expression: a knob's part matches what its grammar allows."""
    return "".join(f"(?:{knobs.get(p.name) or '.*'})" if isinstance(p, Ref) else re.escape(p) for p in word)


def _agreed(args: list[str], form: list[Word], knobs: dict[str, str | None]) -> int:
    """How many words of args, from the first, are the form's."""
    for at, (arg, word) in enumerate(zip(args, form, strict=False)):
        if re.fullmatch(_word(word, knobs), arg, flags=re.ASCII) is None:
            return at
    return min(len(args), len(form))


def _fits(args: list[str], form: list[Word], knobs: dict[str, str | None]) -> bool:
    return len(args) == len(form) and _agreed(args, form, knobs) == len(form)


def _shown(word: Word) -> str:
    return repr("".join(f"${{{p.name}}}" if isinstance(p, Ref) else p for p in word))


def _loads(args: list[str]) -> list[str]:
    """What the command's `env -u` names and server flags change of what runs (what_runs)."""
    server = args.index("serve") + 1 if "serve" in args else len(args)
    unset = [args[i + 1] for i in range(min(server, len(args) - 1)) if args[i] == "-u"]
    return what_runs.refused_env("env -u", unset) + what_runs.refused_args(_flags(args[server:]))


def _flags(words: list[str]) -> dict[str, str | bool]:
    """The server's flags as argparse reads its words: `--name value`, `--name=value` (the value
    carried in the key), a short alias by its long name, a flag without a value true."""
    short = what_runs.short_flags()
    flags: dict[str, str | bool] = {}
    for at, word in enumerate(words):
        alias = re.match(r"-[A-Za-z]+", word)
        if word.startswith("--"):
            flag = word[2:]
        elif alias and alias.group() in short:
            flag = short[alias.group()] + word[alias.end() :]
        else:
            continue
        following = words[at + 1] if at + 1 < len(words) else "-"
        flags[flag] = True if "=" in flag or following.startswith("-") else following
    return flags
