"""A streamed completion against a seat, with token counts from the server's own usage."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from seatkit.errors import SeatError
from seatkit.text import printable


@dataclass
class Completion:
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    chunks: int = 0
    finish_reason: str | None = None
    token_ids: list[int] = field(default_factory=list)  # when the server returns them
    ttft_s: float = 0.0  # request sent to first content chunk
    last_s: float = 0.0  # request sent to last content chunk
    total_s: float = 0.0
    usage_seen: bool = field(default=False, repr=False)
    # The running usage (continuous_usage_stats) as the content arrived: tokens in the first
    # content event, and in the last; None where the server sends usage only at the end.
    first_event_tokens: int | None = None
    streamed_tokens: int | None = None
    cut: str = ""  # why the stream broke off after it had started; empty when it ended cleanly


def stream(url: str, model: str, prompt: str, max_tokens: int, headers: dict | None = None,
           on_text: Callable[[str], None] = lambda t: None, sampling: dict | None = None,
           timeout: float = 300.0, extra: dict | None = None,
           on_event: Callable[[Completion], None] = lambda c: None) -> Completion:
    """Stream one completion with explicit sampling (greedy unless told), ignoring EOS so the
    output length is fixed; tokens are counted from `usage`, never from chunks."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens,
            **(sampling or {"temperature": 0.0}), "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            **(extra or {})}
    out = Completion()
    start = time.monotonic()
    try:
        with requests.post(f"{url}/v1/completions", json=body, headers=headers or {}, stream=True,
                           timeout=timeout) as answer:
            if not answer.ok:
                raise SeatError(f"{url} answered {answer.status_code}: "
                                f"{printable(answer.text[:300])}")
            # Hand over each event as it arrives, never waiting to fill a buffer: per HTTP chunk
            # when the stream is chunked (vLLM's is), else byte by byte.
            try:
                for line in answer.iter_lines(chunk_size=None if answer.raw.chunked else 1):
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    _take(out, json.loads(line[6:]), start, on_text)
                    on_event(out)  # the completion so far, as each event arrives
            except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError) as exc:
                if not out.chunks:
                    raise
                out.cut = type(exc).__name__  # a stream cut short: the caller records it as such
    except requests.RequestException as exc:
        raise SeatError(f"streaming from {url} failed: {exc}") from None
    except ValueError as exc:
        raise SeatError(f"{url} streamed something that is not JSON: {exc}") from None
    out.total_s = time.monotonic() - start
    if not out.usage_seen and not out.cut and out.finish_reason:
        raise SeatError(f"{url} sent no usage in its stream", "the server must honour stream_options")
    return out


def _take(out: Completion, event: dict, start: float, on_text: Callable[[str], None]) -> None:
    for choice in event.get("choices") or []:
        text = choice.get("text") or ""
        if text:
            out.last_s = time.monotonic() - start
            if not out.chunks:
                out.ttft_s = out.last_s
            out.chunks += 1
            out.text += text
            on_text(text)
        out.token_ids += choice.get("token_ids") or []
        out.finish_reason = choice.get("finish_reason") or out.finish_reason
    usage = event.get("usage")
    if usage and any(c.get("text") for c in event.get("choices") or []):
        out.streamed_tokens = usage.get("completion_tokens") or 0
        if out.first_event_tokens is None:
            out.first_event_tokens = out.streamed_tokens
    if usage:
        out.usage_seen = True
        out.prompt_tokens = usage["prompt_tokens"]
        out.completion_tokens = usage.get("completion_tokens") or 0
