"""Check `vllm serve` arguments with the installed vLLM's own parser; run with vLLM's Python.

Reads {"argv": [...]} as JSON on stdin and prints a JSON list of findings, one per flag or
speculative-config key the parser or SpeculativeConfig rejects. Imports nothing from seatkit.
"""

import contextlib
import dataclasses
import io
import json
import re
import sys
import typing

from vllm.config.speculative import SpeculativeConfig  # type: ignore[import-not-found]  # vLLM is the seat venv's, not the kit's
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args  # type: ignore[import-not-found]  # vLLM is the seat venv's, not the kit's
from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]  # vLLM is the seat venv's, not the kit's

ROUNDS = 50  # each round removes one rejected flag, so this bounds the flags checked


def _allowed(hint) -> list[str]:
    out = []
    for arg in typing.get_args(hint):
        out += _allowed(arg) if typing.get_args(arg) else ([arg] if isinstance(arg, str) else [])
    return out


def _drop(argv: list[str], flag: str) -> list[str]:
    """argv without `flag` (or `flag=value`) and the value that follows it."""
    out, skip = [], False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        if token == flag:
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        if token.startswith(flag + "="):
            continue
        out.append(token)
    return out


def parse(argv: list[str]):
    findings = []
    for _ in range(ROUNDS):
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args, unknown = parser.parse_known_args(argv)
        except SystemExit:
            message = (err.getvalue().strip().splitlines() or ["argparse error"])[-1]
            match = re.search(r"argument (--[\w.-]+)", message)
            if not match:
                findings.append({"kind": "flag", "name": "", "stage": "argparse", "message": message})
                return None, findings
            findings.append(
                {
                    "kind": "flag",
                    "name": match.group(1)[2:],
                    "stage": "argparse",
                    "message": message.split(": ", 1)[-1],
                }
            )
            argv = _drop(argv, match.group(1))
            continue
        flags = [u.split("=", 1)[0] for u in unknown if u.startswith("--")]
        if not flags:
            return args, findings
        for flag in flags:
            findings.append(
                {"kind": "flag", "name": flag[2:], "stage": "argparse", "message": "unrecognized argument"}
            )
            argv = _drop(argv, flag)
    return None, findings


def check(argv: list[str]) -> list[dict]:
    args, findings = parse(argv)
    if args is None:
        return findings
    args.subparser = "serve"
    if getattr(args, "model_tag", None):
        args.model = args.model_tag
    try:
        validate_parsed_serve_args(args)
    except Exception as exc:  # vLLM raises plain exceptions here
        findings.append({"kind": "flag", "name": "", "stage": "validate", "message": repr(exc)})
    spec = args.speculative_config or {}
    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    for key in spec:
        if key.replace("-", "_") not in fields:
            findings.append(
                {
                    "kind": "speculative",
                    "name": key,
                    "stage": "SpeculativeConfig",
                    "message": "unexpected keyword argument",
                }
            )
    methods = _allowed(typing.get_type_hints(SpeculativeConfig)["method"])
    if "method" in spec and spec["method"] not in methods:
        findings.append(
            {
                "kind": "speculative",
                "name": "method",
                "stage": "SpeculativeConfig",
                "message": f"unknown method {spec['method']!r}",
            }
        )
    return findings


if __name__ == "__main__":
    print(json.dumps(check(json.load(sys.stdin)["argv"])))
