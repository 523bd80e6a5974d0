"""What the server's own tokenizer says of a prompt: its token count and ids, its padding to a
context target, and the longest context the server takes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import requests

from seatkit.bench import counters, padding
from seatkit.bench.target import Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.serve import client
from seatkit.text import printable


def max_model_len(target: Target) -> int | None:
    try:
        models = client.fetch(
            "GET", f"{target.url}/v1/models", counters.SCRAPE_S, headers=target.headers
        ).json()
        limit = next(m.get("max_model_len") for m in models["data"] if m["id"] == target.model)
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    except (SeatError, requests.RequestException, ValueError, KeyError, TypeError, StopIteration):
        return None


def padded(target: Target, prompt: Prompt) -> Prompt:
    """The prompt padded to its context target, counted by the server's own tokenizer."""

    def count(text: str) -> int:
        tokens, _ = token_hash(target, text, target.chat)
        if tokens is None:
            raise SeatError(f"{target.url} has no /tokenize: a context can't be built to a token target")
        return tokens

    assert prompt.padding is not None  # a prompt with a context target has its padding kind (workload)
    return replace(prompt, text=padding.pad(prompt.text, prompt.padding, prompt.context, count))


def token_hash(target: Target, text: str, chat: bool = False) -> tuple[int | None, str | None]:
    """Token count and SHA-256 of the token ids, from the server's /tokenize when it has one;
    `chat`: of the text as a user message in the model's chat template, as the model reads it."""
    ids = token_ids(target, text, chat)
    if ids is None:
        return None, None
    return len(ids), hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def token_ids(target: Target, text: str, chat: bool = False) -> list[int] | None:
    """The text's token ids by the server's own tokenizer (`chat`: as a user message in the
    model's chat template, reasoning off); None when it has no /tokenize, or no chat template."""
    asked = (
        {
            "messages": [{"role": "user", "content": text}],
            "add_generation_prompt": True,
            "chat_template_kwargs": client.CHAT_OFF,
        }
        if chat
        else {"prompt": text}
    )
    try:
        answer = client.fetch(
            "POST",
            f"{target.url}/tokenize",
            counters.SCRAPE_S,
            headers=target.headers,
            json={"model": target.model, **asked},
        )
        found = answer.json() if answer.ok else None
    except (requests.RequestException, ValueError):
        return None
    if found is None:
        return None
    ids = _token_ids(found)
    if ids is None:
        raise SeatError(
            f'{target.url}/tokenize answered neither vLLM\'s {{"tokens": [ids]}} nor '
            f'TGI\'s [{{"id": id}}, ...]: {printable(repr(found)[:120])}',
            "is this an LLM server? bench it with --url only if it speaks vLLM's API",
        )
    return ids


def _token_ids(found) -> list[int] | None:
    """Token ids from vLLM's /tokenize ({"tokens": [...]}) or TGI's ([{"id": ...}, ...])."""
    if isinstance(found, dict):
        found = found.get("tokens")
    elif isinstance(found, list) and all(isinstance(t, dict) for t in found):
        found = [t.get("id") for t in found]
    if isinstance(found, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in found):
        return found
    return None
