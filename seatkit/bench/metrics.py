"""vLLM's /metrics as numbers the decomposition needs: parsed, summed over engines, differenced.

Names are read from sample lines (the exposition's TYPE lines name counters inconsistently), v1 and
v0 alike; every series is summed over its `engine` label (data-parallel engines). Given the model
served, series labelled with another `model_name` are left out: a second model behind the same
/metrics never lands in our request's deltas.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from seatkit.errors import SeatError

# What the bench reads, by the sample names vLLM v1 exposes, with the v0 names they replaced.
COUNTERS = {
    "drafts": ["vllm:spec_decode_num_drafts_total"],
    "draft_tokens": ["vllm:spec_decode_num_draft_tokens_total"],
    "accepted": ["vllm:spec_decode_num_accepted_tokens_total"],
    "emitted_v0": ["vllm:spec_decode_num_emitted_tokens_total"],
    "generation_tokens": ["vllm:generation_tokens_total"],
    "prompt_tokens": ["vllm:prompt_tokens_total"],
    "steps": ["vllm:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_count"],
    "step_seconds": ["vllm:inter_token_latency_seconds_sum", "vllm:time_per_output_token_seconds_sum"],
    "decode_seconds": ["vllm:request_decode_time_seconds_sum"],
    "ttft_seconds": ["vllm:time_to_first_token_seconds_sum"],
    "ttft_count": ["vllm:time_to_first_token_seconds_count"],
    "prefix_queries": ["vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"],
    "prefix_hits": ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"],
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SUCCESS = "vllm:request_success_total"
GAUGES = {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting"}


@dataclass
class Snapshot:
    values: dict[str, float] = field(default_factory=dict)
    per_position: dict[int, float] = field(default_factory=dict)
    success: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)

    @property
    def has_spec(self) -> bool:
        return "drafts" in self.values or "draft_tokens" in self.values

    def __sub__(self, before: Snapshot) -> Snapshot:
        """after - before, for counters present in both (gauges are the later reading)."""
        return Snapshot(
            values={k: v - before.values[k] for k, v in self.values.items() if k in before.values},
            per_position={i: v - before.per_position.get(i, 0.0) for i, v in self.per_position.items()},
            success={r: v - before.success.get(r, 0.0) for r, v in self.success.items()},
            gauges=dict(self.gauges),
        )


def parse(text: str, model: str | None = None) -> Snapshot:
    """One /metrics body, only `model`'s series where given; raises SeatError when it is not the
    Prometheus text format."""
    from prometheus_client.parser import text_string_to_metric_families  # a bench's cost, not an import's

    sums: dict[str, float] = defaultdict(float)
    per_position: dict[int, float] = defaultdict(float)
    success: dict[str, float] = defaultdict(float)
    names = {name: key for key, options in COUNTERS.items() for name in options}
    gauges = {name: key for key, name in GAUGES.items()}
    seen_gauges: dict[str, float] = defaultdict(float)
    try:
        families = list(text_string_to_metric_families(text))
        served = {s.labels["model_name"] for f in families for s in f.samples if "model_name" in s.labels}
        if model is not None and served and model not in served:
            if len(served) > 1:  # an alias of one of them, or the wrong server: no way to tell
                raise SeatError(
                    f"/metrics labels the models {', '.join(sorted(served))}, none of "
                    f"them {model}: the bench can't tell which counters are its own",
                    "bench the model by the name the server serves it as",
                )
            model = None  # one model under another name (an alias): its series are ours
        for family in families:
            for sample in family.samples:
                if model is not None and sample.labels.get("model_name", model) != model:
                    continue
                read = sample.name in names or sample.name in gauges or sample.name in (PER_POSITION, SUCCESS)
                if read and not math.isfinite(sample.value):
                    raise SeatError(
                        f"/metrics gives {sample.name} = {sample.value}: a counter the "
                        "bench reads is not a finite number",
                        "the server's metrics are broken; its figures can't be trusted",
                    )
                if sample.name in names:
                    sums[names[sample.name]] += sample.value
                elif sample.name == PER_POSITION:
                    per_position[int(sample.labels["position"])] += sample.value
                elif sample.name == SUCCESS:
                    success[sample.labels.get("finished_reason", "")] += sample.value
                elif sample.name in gauges:
                    seen_gauges[gauges[sample.name]] += sample.value
    except (ValueError, KeyError, TypeError) as exc:
        raise SeatError(f"/metrics is not Prometheus text: {exc}") from None
    return Snapshot(dict(sums), dict(per_position), dict(success), dict(seen_gauges))
