"""A streamed completion against a seat, with token counts from the server's own usage, and the
bench's other requests; each one ends by an overall deadline, however the server answers."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import requests

from seatkit.errors import SeatError
from seatkit.serve.deadline import Deadline
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
    held: str = field(default="", repr=False)  # a high surrogate whose low half is still to come


def fetch(method: str, url: str, seconds: float, **kwargs) -> requests.Response:
    """A small request whose whole answer arrives within `seconds`, or a SeatError (or
    requests.RequestException, as requests raises it) saying so."""
    deadline = Deadline(seconds)
    try:
        with (
            deadline.session() as session,
            session.request(method, url, stream=True, timeout=min(seconds, 10), **kwargs) as answer,
        ):
            deadline.hold(answer)
            body = bytearray()
            for chunk in answer.iter_content(chunk_size=65536):
                if deadline.passed:  # a shut socket still yields what the kernel had queued
                    raise deadline.error(url, method)
                body += chunk
            if deadline.passed:  # cut mid-headers or mid-body, what came may look whole
                raise deadline.error(url, method)
            answer._content = bytes(body)
            return answer
    except requests.RequestException:
        if deadline.passed:
            raise deadline.error(url, method) from None
        raise
    finally:
        deadline.close()


def _events(answer: requests.Response, url: str, watch: Deadline) -> Iterator[dict]:
    """The stream's completion events, each parsed: no line cut at the deadline is taken."""
    for line in _lines(answer, url, watch):
        if watch.passed:  # a line cut at the deadline may still parse
            raise watch.error(url, "the stream")
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            yield json.loads(line[6:])


def _cut_short(out: Completion, exc: Exception, url: str, watch: Deadline) -> None:
    """A connection lost mid-stream: the deadline's, an error before any chunk, else a cut stream."""
    if watch.passed:
        raise watch.error(url, "the stream") from None
    if not out.chunks:
        raise exc
    out.cut = type(exc).__name__


def _receive(
    answer: requests.Response,
    url: str,
    watch: Deadline,
    out: Completion,
    max_tokens: int,
    take: Callable[[dict], None],
) -> None:
    """Each event of the answer to take; an error status, or more tokens than asked, refused."""
    watch.hold(answer)
    if watch.passed:  # cut mid-headers: what came may look like an answer
        raise watch.error(url, "the stream")
    if not answer.ok:  # its first bytes only: an error page can be endless too
        said = answer.raw.read(300, decode_content=True).decode(errors="replace")
        raise SeatError(f"{url} answered {answer.status_code}: {printable(said)}")
    try:
        for event in _events(answer, url, watch):
            take(event)
            if watch.passed:  # where the socket could not be shut
                raise watch.error(url, "the stream")
            # What streamed, never the final usage: that can overstate (the bench says so).
            if max(out.streamed_tokens or 0, len(out.token_ids), out.chunks) > max_tokens:
                raise SeatError(
                    f"{url} sent more than the {max_tokens} tokens asked for",
                    "the server ignores max_tokens: it is not a seat to bench",
                )
    except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError) as exc:
        _cut_short(out, exc, url, watch)


# Reasoning off, by the names chat templates read it under (Qwen's, DeepSeek's); a template
# that has no reasoning ignores them.
CHAT_OFF = {"enable_thinking": False, "thinking": False}


def _body(
    model: str, prompt: str, max_tokens: int, sampling: dict | None, extra: dict | None, chat: bool
) -> dict:
    """One streamed request: greedy unless told, EOS ignored, usage in every event."""
    return {
        "model": model,
        **(
            {"messages": [{"role": "user", "content": prompt}], "chat_template_kwargs": CHAT_OFF}
            if chat
            else {"prompt": prompt}
        ),
        "max_tokens": max_tokens,
        **(sampling or {"temperature": 0.0}),
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        **(extra or {}),
    }


def stream(
    url: str,
    model: str,
    prompt: str,
    max_tokens: int,
    headers: dict | None = None,
    on_text: Callable[[str], None] = lambda t: None,
    sampling: dict | None = None,
    timeout: float = 300.0,
    extra: dict | None = None,
    on_event: Callable[[Completion], None] = lambda c: None,
    deadline: float | None = None,
    chat: bool = False,
) -> Completion:
    """Stream one completion with explicit sampling (greedy unless told), ignoring EOS so the output
    length is fixed; tokens are counted from `usage`, never from chunks. It ends within `deadline`
    seconds (default: allowed_seconds(max_tokens)) or at more than max_tokens, as a SeatError.
    `chat`: the prompt as a user message to the chat endpoint, so the model reads it in its own
    chat template, reasoning off (CHAT_OFF)."""
    body = _body(model, prompt, max_tokens, sampling, extra, chat)
    out, start = Completion(), time.monotonic()
    watch = Deadline(deadline or allowed_seconds(max_tokens))

    def take(event: dict) -> None:
        _take(out, event, start, on_text)
        on_event(out)  # the completion so far, as each event arrives

    try:
        with (
            watch.session() as session,
            session.post(
                f"{url}/v1/chat/completions" if chat else f"{url}/v1/completions",
                json=body,
                headers=headers or {},
                stream=True,
                timeout=min(timeout, watch.seconds),
            ) as answer,
        ):
            _receive(answer, url, watch, out, max_tokens, take)
    except requests.RequestException as exc:
        if watch.passed:
            raise watch.error(url, "the stream") from None
        raise SeatError(f"streaming from {url} failed: {exc}") from None
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # another server's JSON, or none
        raise SeatError(f"{url} streamed an event that is not a completion's JSON: {exc}") from None
    finally:
        watch.close()
    if watch.passed and not out.finish_reason:  # cut where the end looked clean
        raise watch.error(url, "the stream")
    _flush(out, on_text)
    out.total_s = time.monotonic() - start
    if not out.usage_seen and not out.cut and out.finish_reason:
        raise SeatError(f"{url} sent no usage in its stream", "the server must honour stream_options")
    return out


# The bench's deadline for one stream: the first token within FIRST_S, then at least FLOOR_TOK_S.
# A seat slower than that is broken, not slow (the CPU test seats decode tens of tokens a second).
# A context prompt adds its prefill at PREFILL_FLOOR_TOK_S.
FIRST_S = 120.0
FLOOR_TOK_S = 2.0
PREFILL_FLOOR_TOK_S = 100.0
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _lines(answer: requests.Response, url: str, watch: Deadline):
    """The stream's lines as they arrive. Hand over each event as it arrives, never waiting to fill a buffer: per HTTP chunk (vLLM's stream is chunked; a huge chunk
    in 64 KiB pieces), else byte by byte."""
    pending = bytearray()
    for piece in answer.iter_content(chunk_size=65536 if answer.raw.chunked else 1):
        if watch.passed:  # a shut socket still yields what the kernel had queued, and takes more
            raise watch.error(url, "the stream")
        pending += piece
        *whole, rest = pending.split(b"\n")
        for line in whole:
            yield bytes(line.rstrip(b"\r"))
        pending = bytearray(rest)
    if pending:
        yield bytes(pending.rstrip(b"\r"))


def allowed_seconds(max_tokens: int, context: int = 0) -> float:
    return FIRST_S + context / PREFILL_FLOOR_TOK_S + max_tokens / FLOOR_TOK_S


def _whole(text: str) -> str:
    """Surrogate halves (JSON's "\\ud83d\\ude00") joined into their character; a lone one kept
    as its escape, so the text can be encoded, hashed and printed."""
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", joined)


def _flush(out: Completion, on_text: Callable[[str], None]) -> None:
    if out.held:  # the low half never came
        text, out.held = _whole(out.held), ""
        out.text += text
        on_text(text)


def _take(out: Completion, event: dict, start: float, on_text: Callable[[str], None]) -> None:
    arrived = False  # a token came with this event: text, or a count that grew ("" text: half a character)
    for choice in event.get("choices") or []:
        delta = choice.get("delta")  # a chat event's text is its delta's content
        text = (delta.get("content") if isinstance(delta, dict) else choice.get("text")) or ""
        text, out.held = out.held + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":  # a high half: its low half may follow
            text, out.held = text[:-1], text[-1]
        text = _whole(text)
        if text:
            arrived = True
            out.text += text
            on_text(text)
        out.token_ids += choice.get("token_ids") or []
        out.finish_reason = choice.get("finish_reason") or out.finish_reason
    usage = event.get("usage")
    if usage and event.get("choices"):  # every event of the stream, its text empty or not
        count = usage.get("completion_tokens") or 0
        arrived = arrived or count > (out.streamed_tokens or 0)
        out.streamed_tokens = count
        if out.first_event_tokens is None and count:
            out.first_event_tokens = count
    if arrived:
        out.last_s = time.monotonic() - start
        if not out.chunks:
            out.ttft_s = out.last_s
        out.chunks += 1
    if usage:
        out.usage_seen = True
        out.prompt_tokens = usage["prompt_tokens"]
        out.completion_tokens = usage.get("completion_tokens") or 0
