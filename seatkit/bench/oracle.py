"""A ground-truth streaming server for `seat bench selftest` — a test oracle, never a seat.

It speaks just enough of vLLM's OpenAI API and /metrics for the bench, and runs one engine loop
like vLLM's: every step serves every running request, takes a known time that grows with the batch
(step_ms + batch_ms per extra request), and gives each request a known number of tokens, so what
the bench measures can be compared with the truth. Counters move as vLLM v1's do: generation
tokens and inter-token latencies per step, drafts accepted in the last step counted before
max_tokens cuts them. Run it in its own process, so the client's threads do not disturb its timing:

    python -m seatkit.bench.oracle_server --port P --tokens-per-step T --step-ms M [--batch-ms B] [--k K]

`Quirks` make it misbehave the way real servers do, one known way at a time, so a test can show
what the bench prints then (the right figure, or the figure withheld with the reason).
`Quirks.fault` makes it misbehave as broken or foreign servers do, for the tests of the bench's
defences: see FAULTS.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

# The truth the tests and selftest read as oracle.truth, oracle.tokens: its own module, named here.
from seatkit.bench.oracle_steps import schedule_sizes, step_sizes, tokens, truth  # noqa: F401

MODEL = "oracle"
OTHER_MODEL = "oracle-idle"  # a second model behind the same /metrics (Quirks.other_model)
SPEC = (
    "spec_decode_num_drafts_total",
    "spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens_total",
    "inter_token_latency_seconds_count",
    "inter_token_latency_seconds_sum",
)


@dataclass(frozen=True)
class Quirks:
    """Ways a real server departs from the plain schedule; all off by default."""

    ngram: bool = False  # a step that gives one token drafted nothing (ngram found no match)
    hide: frozenset = frozenset()  # counter families not exported, e.g. {"inter_token_latency_seconds"}
    frozen: frozenset = frozenset()  # counter families exported but never moving (stuck at 0)
    ignore_salt: bool = False  # the prefix cache ignores cache_salt: a prompt seen before is a hit
    spec_period_s: float = 0.0  # spec-decode and per-step counters published on this period
    usage_extra: int = 0  # the final usage claims this many tokens more than were streamed
    generation_extra: int = 0  # the generation counter claims this many tokens more per request
    hold_first: bool = False  # the first token waits for the first decode step, in one event
    prefix_cache: bool = False  # a prompt seen before (same cache_salt) skips most of its prefill
    prefill_ms_per_token: float = 0.0  # prefill time grows with the prompt
    other_model: bool = False  # a second model's counters move behind the same /metrics
    chunk_tokens: int = 0  # max-num-batched-tokens: a longer prompt prefills over several steps
    # (chunked prefill), counted in the running gauge and the prefix-cache queries from its first
    # chunk, in the prompt, TTFT and success counters only from its first token, as vLLM does
    version: str = "oracle"  # what /version answers
    adaptive: bool = False  # drafts only as many tokens as it expects accepted plus one (at most k)
    loop: str = ""  # every token's text is this, so the output loops (" t0 t1 ..." when empty)
    no_chat_template: bool = False  # a base model: its chat endpoint and /tokenize refuse messages
    empty_last: bool = False  # the last event's text is "" (its token half a character), its count whole
    exposition_ms: float = 0.0  # /metrics takes this long and holds up every stream meanwhile
    # (vLLM's exposition runs on the API server's one event loop, which also writes the streams)
    fault: str | None = None  # one of FAULTS: a broken or foreign server


FAULTS = {
    "trickle-metrics": "/metrics sends one byte every 5 s",
    "trickle-headers": "/metrics sends its headers one byte every 5 s",
    "endless": "a completion ignores max_tokens and streams until the client leaves",
    "tokenize-list": "/tokenize answers a JSON list, as TGI does",
    "surrogates": "an emoji streamed as two UTF-16 surrogate halves in two chunks, then a lone half",
}
TRICKLE_S = 5.0


@dataclass
class Request:
    max_tokens: int
    prompt_tokens: int
    arrived: float
    out: queue.Queue = field(default_factory=queue.Queue)
    sizes: list[int] = field(default_factory=list)
    emitted: int = 0
    chunks: int = 0
    first: float = 0.0
    previous: float = 0.0
    key: tuple = ()
    held: int = 0  # tokens made but not yet sent (Quirks.hold_first)
    prefilled: int = 0  # prompt tokens prefilled so far (Quirks.chunk_tokens)
    chunk: int = 0  # prompt tokens this step prefills
    hit: bool = False  # a prefix-cache hit, decided when first scheduled
    chat: bool = False  # asked at the chat endpoint: its events carry deltas


class Oracle:
    def __init__(
        self,
        tokens_per_step: float,
        step_ms: float,
        k: int,
        prefill_ms: float,
        batch_ms: float = 0.0,
        quirks: Quirks = Quirks(),
        acceptance: tuple[float, ...] = (),
        draft_ms: float = 0.0,
    ):
        """`acceptance`: a per-position schedule (schedule_sizes) instead of tokens_per_step;
        `draft_ms`: each step also takes this long per token drafted (k a step)."""
        if list(acceptance) != sorted(acceptance, reverse=True) or not all(0 <= a <= 1 for a in acceptance):
            raise ValueError("a chain's acceptance by position is a falling list of shares in 0..1")
        if not 1 <= tokens_per_step <= k + 1:
            raise ValueError(f"tokens per step must be within 1..k+1 ({k + 1})")
        if quirks.fault is not None and quirks.fault not in FAULTS:
            raise ValueError(f"no fault {quirks.fault!r}: {', '.join(FAULTS)}")
        self.tokens_per_step, self.k = tokens_per_step, k
        self.step_s, self.batch_s, self.prefill_s = step_ms / 1000, batch_ms / 1000, prefill_ms / 1000
        self.acceptance, self.draft_s, self.submitted = acceptance, draft_ms / 1000, 0
        self.lock = threading.Condition()
        self.counters: defaultdict[str, float] = defaultdict(int)  # counts stay ints, *_sum add seconds
        self.per_position: Counter = Counter()
        self.pending: list[Request] = []
        self.running: list[Request] = []
        self.quirks = quirks
        self.published: dict = {}  # the spec counters as last published (Quirks.spec_period_s)
        self.published_at = -math.inf
        self.seen_prompts: set = set()
        self.chats = 0  # requests asked at the chat endpoint
        self.other: Counter = Counter()  # the second model's counters (Quirks.other_model)
        self.frontend = threading.Lock()  # the API loop: exposition and stream writes take turns
        threading.Thread(target=self._engine, daemon=True).start()
        if quirks.other_model:
            threading.Thread(target=self._other_model, daemon=True).start()

    def _other_model(self) -> None:
        """Another model served behind the same /metrics finishes a request every 10 ms."""
        while True:
            time.sleep(0.01)
            with self.lock:
                for name in ("generation_tokens_total", "spec_decode_num_drafts_total", "success_length"):
                    self.other[name] += 3
                self.other["inter_token_latency_seconds_count"] += 3

    def prefill_seconds(self, request: Request) -> float:
        """This step's share of the request's prefill, scheduling it: cold, the fixed cost (on its
        first chunk) plus the per-token one; a prefix-cache hit, a tenth of the fixed. Its prompt is
        queried against the prefix cache when first scheduled."""
        first = request.prefilled == 0 and request.chunk == 0
        if first:
            request.hit = self.quirks.prefix_cache and request.key in self.seen_prompts
            self.counters["prefix_cache_queries_total"] += request.prompt_tokens
            if request.hit:
                self.counters["prefix_cache_hits_total"] += request.prompt_tokens
        left = request.prompt_tokens - request.prefilled
        request.chunk = min(left, self.quirks.chunk_tokens) if self.quirks.chunk_tokens else left
        if request.hit:
            request.chunk = left
            return self.prefill_s / 10
        fixed = self.prefill_s if request.prefilled == 0 else 0.0
        return fixed + self.quirks.prefill_ms_per_token / 1000 * request.chunk

    def step_seconds(self, batch: int) -> float:
        return self.step_s + self.draft_s * self.k + self.batch_s * (batch - 1)

    def metrics(self) -> str:
        if self.quirks.exposition_ms:
            with self.frontend:
                time.sleep(self.quirks.exposition_ms / 1000)
        with self.lock:
            c, pos = dict(self.counters), dict(self.per_position)
            running = len(self.running) + len(self.pending)
            if self.quirks.spec_period_s:  # spec counters as last published, not as they are
                now = time.monotonic()
                if now - self.published_at >= self.quirks.spec_period_s:
                    self.published = {**{n: c.get(n, 0) for n in SPEC}, "per_position": pos}
                    self.published_at = now
                c.update({n: self.published[n] for n in SPEC})
                pos = self.published["per_position"]
            other = dict(self.other)
        lines = self._series(MODEL, c, pos, running)
        if self.quirks.other_model:
            lines += self._series(OTHER_MODEL, other, {}, 1)
        return "\n".join(lines) + "\n"

    def _series(self, model: str, c: dict, pos: dict, running: int) -> list[str]:
        label = f'engine="0",model_name="{model}"'
        lines = [f"vllm:num_requests_running{{{label}}} {running}", f"vllm:num_requests_waiting{{{label}}} 0"]
        for name in (
            *SPEC,
            *("generation_tokens_total", "prompt_tokens_total", "request_decode_time_seconds_sum"),
            *("time_to_first_token_seconds_count", "time_to_first_token_seconds_sum"),
            *("prefix_cache_queries_total", "prefix_cache_hits_total"),
        ):
            if not any(name.startswith(hidden) for hidden in self.quirks.hide):
                stuck = any(name.startswith(family) for family in self.quirks.frozen)
                lines.append(f"vllm:{name}{{{label}}} {0.0 if stuck else float(c.get(name, 0))}")
        for i in range(self.k):
            lines.append(
                f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},"
                f'position="{i}"}} {float(pos.get(i, 0))}'
            )
        lines.append(
            f'vllm:request_success_total{{{label},finished_reason="length"}} '
            f"{float(c.get('success_length', 0))}"
        )
        return lines

    def submit(self, body: dict) -> Request:
        request = Request(int(body["max_tokens"]), len(tokens(body["prompt"])), time.monotonic())
        self.submitted += 1
        request.sizes = (
            schedule_sizes(request.max_tokens - 1, self.acceptance, self.k, hash((self.k, self.submitted)))
            if self.acceptance
            else step_sizes(request.max_tokens - 1, self.tokens_per_step)
        )
        request.key = (None if self.quirks.ignore_salt else body.get("cache_salt"), body["prompt"])
        request.chat = bool(body.get("chat"))
        self.chats += request.chat
        with self.lock:
            self.pending.append(request)
            self.lock.notify()
        return request

    def _engine(self) -> None:
        """One step after another on a fixed clock: new requests get their first token (prefill),
        running ones their next step; a request's chunks go to its own queue, written elsewhere."""
        due = 0.0
        while True:
            with self.lock:
                if not (self.pending or self.running):
                    while not (self.pending or self.running):
                        self.lock.wait()
                    due = time.monotonic()  # a busy engine keeps its clock: no drift per step
                batch = len(self.pending) + len(self.running)
                prefill = sum(self.prefill_seconds(r) for r in self.pending)
            due += prefill + self.step_seconds(batch)
            time.sleep(max(0.0, due - time.monotonic()))
            now = time.monotonic()  # timed as a server times itself, not copied from the schedule
            with self.lock:
                self._step(now)

    def _step(self, now: float) -> None:
        c = self.counters
        for request in self.running:
            size = request.sizes.pop(0)
            delivered = min(size, request.max_tokens - request.emitted - request.held)
            if not (self.quirks.ngram and size == 1):  # ngram with no match drafts nothing
                c["spec_decode_num_drafts_total"] += 1
                c["spec_decode_num_draft_tokens_total"] += (
                    min(self.k, size) if self.quirks.adaptive else self.k
                )
            c["spec_decode_num_accepted_tokens_total"] += size - 1  # counted before the cut
            c["inter_token_latency_seconds_count"] += 1
            c["inter_token_latency_seconds_sum"] += now - request.previous
            c["generation_tokens_total"] += delivered
            for position in range(size - 1):
                self.per_position[position] += 1
            request.previous = now
            self._emit(request, delivered)
        for request in self.pending:
            request.prefilled += request.chunk
            request.chunk = 0
        prefilled = [r for r in self.pending if r.prefilled >= r.prompt_tokens]
        self.pending = [r for r in self.pending if r.prefilled < r.prompt_tokens]
        for request in prefilled:
            request.first = request.previous = now
            c["time_to_first_token_seconds_count"] += 1
            c["time_to_first_token_seconds_sum"] += now - request.arrived
            c["prompt_tokens_total"] += request.prompt_tokens
            self.seen_prompts.add(request.key)
            c["generation_tokens_total"] += 1
            if self.quirks.hold_first:  # made now, sent with the next step's tokens
                request.held = 1
            else:
                self._emit(request, 1)
        self.running += prefilled
        for request in [r for r in self.running if r.emitted == r.max_tokens]:
            self.running.remove(request)
            c["request_decode_time_seconds_sum"] += request.previous - request.first
            c["generation_tokens_total"] += self.quirks.generation_extra
            c["success_length"] += 1
            request.out.put(None)

    def _emit(self, request: Request, count: int) -> None:
        count, request.held = count + request.held, 0
        text = "".join(self.quirks.loop or f" t{request.emitted + j}" for j in range(count))
        if self.quirks.fault == "surrogates":  # json.dumps writes each half as its own \\uXXXX escape
            text = {0: "\ud83d", 1: "\ude00", 2: " \udc00 "}.get(request.chunks, text)
        request.chunks += 1
        request.emitted += count
        done = request.emitted == request.max_tokens
        if done and self.quirks.empty_last:
            text = ""
        finish = "length" if done else None
        request.out.put(self._chunk(text, request.emitted, request.prompt_tokens, finish, request.chat))

    def complete(self, body: dict, write) -> None:
        """Stream one completion as the engine produces it."""
        if self.quirks.fault == "endless":
            for n in range(1, 1 << 30):  # ends when the client leaves (the write fails)
                write(self._chunk(f" t{n}", n, 1))
                time.sleep(self.step_s)
        request = self.submit(body)
        while (chunk := request.out.get()) is not None:
            with self.frontend:
                write(chunk)
        usage = self._usage(request.max_tokens + self.quirks.usage_extra, request.prompt_tokens)
        write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")

    @staticmethod
    def _usage(n: int, prompt_tokens: int) -> dict:
        return {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}

    def _chunk(
        self, text: str, emitted: int, prompt_tokens: int, finish: str | None = None, chat: bool = False
    ) -> bytes:
        said = {"delta": {"content": text}} if chat else {"text": text}
        event = {
            "object": "chat.completion.chunk" if chat else "text_completion",
            "model": MODEL,
            "choices": [{"index": 0, **said, "finish_reason": finish}],
            "usage": self._usage(emitted, prompt_tokens),
        }
        return b"data: " + json.dumps(event).encode() + b"\n\n"
