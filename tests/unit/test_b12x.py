"""The b12x kernel change: a condition of the reference card, a label of the image, a differing
condition in compare, and the optional b12x overlay in the build context and the image tag."""

import io
import json
import tarfile

from seatkit import paths
from seatkit.bench import cards, compare
from seatkit.image import b12x, build, overlay
from seatkit.seat import overlay_lock, profiles

B12X_DIR = "/opt/venv/lib/python3.12/site-packages/b12x"


def run_dir(tmp_path, kernels):
    folder = tmp_path / "run"
    folder.mkdir()
    stats = lambda v: {"median": v, "min": v, "max": v, "cv": 0.01, "n": 5}  # noqa: E731
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "conditions": {
                    "model": "deepseek-ai/DeepSeek-V4-Flash",
                    "k": 5,
                    "sampling": {"temperature": 0.1},
                    "b12x_kernels": kernels,
                },
                "suites": {
                    "prose": {
                        "content": "prose",
                        "context": 0,
                        "decode_tok_s": stats(200.0),
                        "tokens_per_step": stats(2.87),
                        "ms_per_step": stats(14.35),
                    }
                },
            }
        )
    )
    return str(folder)


def test_the_reference_card_records_the_local_kernel_change():
    card = cards.load("deepspark-readme")
    kernels = card.conditions.b12x_kernels
    assert "expected_m" in kernels and "b12x/gemm/dense.py" in kernels and "not in the public" in kernels


def test_compare_lists_b12x_kernels_as_a_condition_that_moves_ms_per_step(tmp_path):
    labels = {
        "io.seatkit.b12x.dense_sha256": "ab" * 32,
        "io.seatkit.b12x.overlay": b12x.PUBLIC,
        "io.seatkit.b12x.commit": "0ff2847b0c55c599c8acabb32e694ce07faa1247",
    }
    run = run_dir(tmp_path, b12x.kernels(labels))
    result = compare.compare(run, "deepspark-readme")
    assert "b12x_kernels" not in result.differing
    (text,) = result.differing["b12x kernels"]
    assert text.startswith(
        "public (base image), b12x 0ff2847b0c55c599c8acabb32e694ce07faa1247, "
        "gemm/dense.py sha256 abababababababab vs local change"
    )
    assert text.endswith("(usually moves ms/step)")
    assert "b12x kernels" in compare.markdown(result)
    same = compare.compare(run, run)
    assert "b12x kernels" not in same.differing


def test_kernels_condition_from_labels():
    assert b12x.kernels(None).startswith("unrecorded")
    assert b12x.kernels(
        {
            "io.seatkit.b12x.dense_sha256": "cd" * 32,
            "io.seatkit.b12x.overlay": "https://x@" + "a" * 40 + " lock sha256 " + "e" * 64,
            "io.seatkit.b12x.commit": "unrecorded by the base",
        }
    ).startswith("overlay https://x@")


def test_the_b12x_overlay_lands_over_the_b12x_package_in_the_context(tmp_path):
    vllm, patched = tmp_path / "vllm", tmp_path / "b12x"
    (vllm).mkdir()
    (vllm / "__init__.py").write_text("")
    (patched / "gemm").mkdir(parents=True)
    (patched / "gemm" / "dense.py").write_text("EXPECTED_M = True\n")
    lock = overlay.lock_from(vllm, "https://example.invalid/o@" + "a" * 40)
    kernels = overlay.lock_from(patched, "https://example.invalid/b12x@" + "b" * 40, "b12x")
    with tarfile.open(
        fileobj=io.BytesIO(build.context(lock, vllm, b12x=(kernels, patched, B12X_DIR)).data)
    ) as tar:
        names = tar.getnames()
        assert tar.extractfile("overlay/b12x.lock").read().decode() == kernels.dump()
        assert tar.extractfile(f"{build.ROOTED}{B12X_DIR}/gemm/dense.py").read() == b"EXPECTED_M = True\n"
    assert f"{build.ROOTED}{B12X_DIR}/gemm" in names  # each folder an entry with the fixed time
    with tarfile.open(fileobj=io.BytesIO(build.context(lock, vllm).data)) as tar:
        assert "overlay/b12x.lock" not in tar.getnames()
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    assert overlay_lock.seat_tag(seat, lock, kernels).endswith(f"-b12x-{kernels.sha256[:12]}")
    assert "b12x" not in overlay_lock.seat_tag(seat, lock)


def test_without_a_b12x_lock_the_kit_says_the_seat_runs_the_public_kernels(tmp_path):
    assert not overlay_lock.B12X_LOCK.exists()  # the kit ships none: nobody published the patched files
    assert overlay_lock.load_b12x(tmp_path / "b12x.lock") is None
    assert b12x.PUBLIC.startswith("none: the base image's public b12x kernels")
    text = (paths.REPO / "CAVEATS.md").read_text()
    assert "public b12x kernels" in text and "expected_m" in text


def test_dense_py_is_hashed_as_the_image_will_hold_it(monkeypatch):
    base = {f"{B12X_DIR}/gemm/dense.py": "1" * 64}
    monkeypatch.setattr(b12x, "_sha256_in", lambda container, path: base.get(path))
    source = "https://example.invalid/b"
    replaces = overlay_lock.Lock(source, "a" * 40, "b12x", "b" * 40, {"gemm/dense.py": "2" * 64})
    elsewhere = overlay_lock.Lock(source, "a" * 40, "b12x", "b" * 40, {"moe/micro.py": "3" * 64})
    assert b12x.provenance(None, {}, B12X_DIR, replaces)["B12X_DENSE_SHA256"] == "2" * 64
    assert b12x.provenance(None, {}, B12X_DIR, elsewhere)["B12X_DENSE_SHA256"] == "1" * 64
    public = b12x.provenance(None, {b12x.BASE_COMMIT_LABEL: "0ff2847"}, B12X_DIR, None)
    assert public == {
        "B12X_DIR": B12X_DIR,
        "B12X_COMMIT": "0ff2847",
        "B12X_DENSE_SHA256": "1" * 64,
        "B12X_OVERLAY": b12x.PUBLIC,
    }
    base.clear()
    bare = b12x.provenance(None, {}, B12X_DIR, None)
    assert bare["B12X_DENSE_SHA256"].startswith("absent") and bare["B12X_COMMIT"] == "unrecorded by the base"


def test_kernels_condition_names_a_mount_over_the_b12x_package():
    """extra_mounts may mount a b12x tree over the package (the original's B12X_OVERLAY): the run
    must not then record the image's public kernels."""
    labels = {
        "io.seatkit.b12x.dense_sha256": "cd" * 32,
        "io.seatkit.b12x.overlay": b12x.PUBLIC,
        "io.seatkit.b12x.commit": "0ff2847",
    }
    site = "/opt/venv/lib/python3.12/site-packages"
    for target in (f"{site}/b12x", f"{site}/b12x/gemm/dense.py", site, "/opt/"):
        mounted = b12x.mounted_over([{"Source": "/srv/patched", "Destination": target}], f"{site}/b12x")
        assert mounted == [f"/srv/patched at {target}"]
        text = b12x.kernels(labels, mounted)
        assert "mounted over" in text and "/srv/patched" in text and "public" not in text
    for target in (f"{site}/b12x_extra", f"{site}/vllm", "/cache"):
        assert b12x.mounted_over([{"Source": "/x", "Destination": target}], f"{site}/b12x") == []
    assert b12x.kernels(labels, []).startswith("public (base image)")
