"""review4: tree.layer (the judgement of what was written into a running seat's container: doctor,
`seat overlay verify --container`, the bench's mark) lets through anything under /root/.cache,
where the server loads compiled code from when it finds it (what_runs.yaml refuses a mount there
for that very reason: "the default caches of compiled code vLLM, FlashInfer, torch and Triton load
and run"). CAVEATS.md names /tmp alone as not judged."""

from pathlib import PurePosixPath

from seatkit.image import tree
from seatkit.seat import what_runs

VLLM_DIR = "/opt/venv/lib/python3.12/site-packages/vllm"


def changes(*added: str) -> list[dict]:
    paths = {str(p) for a in added for p in PurePosixPath(a).parents if str(p) != "/"}
    return [{"Path": p, "Kind": 0} for p in sorted(paths)] + [{"Path": a, "Kind": 1} for a in added]


def test_a_jit_module_planted_in_roots_cache_is_not_judged():
    planted = "/root/.cache/flashinfer/0.5.0/90/cached_ops/sampling/sampling.so"
    assert what_runs.refused_mount("docker.extra_mounts[0].target", "/root/.cache", VLLM_DIR, "/b12x")
    assert tree.layer(changes(planted), VLLM_DIR), "a compiled module the server will load, unjudged"


def test_vllm_compile_artifacts_planted_in_roots_cache_are_not_judged():
    planted = "/root/.cache/vllm/torch_compile_cache/abc123/rank_0_0/backbone/artifact_shape_None_subgraph_0"
    assert tree.layer(changes(planted), VLLM_DIR)
