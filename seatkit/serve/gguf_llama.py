"""Convert a llama-architecture GGUF file into a Hugging Face model folder vLLM serves as it is.

Run with the runtime venv's Python (torch, safetensors and transformers come with vLLM); `gguf` is
found in the folder given first, where `seat setup` installed it. It imports nothing from seatkit.
transformers' own GGUF loader keeps the weights quantized and cannot save them, hence this file.
Usage: python -I gguf_llama.py GGUF_PACKAGE_DIR FILE.gguf OUT_DIR
"""

import json
import os
import re
import sys

NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
PER_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


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
    arch = meta["general.architecture"]
    if arch != "llama":
        fail(f"the GGUF file holds a {arch} model; this converter knows llama only")
    get = lambda key: meta[f"llama.{key}"]  # noqa: E731
    heads = get("attention.head_count")
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": get("embedding_length"), "intermediate_size": get("feed_forward_length"),
        "num_hidden_layers": get("block_count"), "num_attention_heads": heads,
        "num_key_value_heads": get("attention.head_count_kv"),
        "head_dim": get("embedding_length") // heads,
        "max_position_embeddings": get("context_length"),
        "rms_norm_eps": get("attention.layer_norm_rms_epsilon"),
        "rope_theta": get("rope.freq_base"), "vocab_size": get("vocab_size"),
        "hidden_act": "silu", "tie_word_embeddings": tied, "torch_dtype": "bfloat16",
        "bos_token_id": meta["tokenizer.ggml.bos_token_id"],
        "eos_token_id": meta["tokenizer.ggml.eos_token_id"],
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id", meta["tokenizer.ggml.eos_token_id"]),
    }


def dump(path: str, data: dict) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")


def convert(source: str, out: str) -> int:
    import gguf
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    try:
        reader = gguf.GGUFReader(source)
        meta = {k: reader.fields[k].contents() for k in reader.fields
                if k.startswith(("general.", "llama.")) or k.endswith("_token_id")}
        if "llama.vocab_size" not in meta:  # older files give it only as the token list's length
            meta["llama.vocab_size"] = len(reader.fields["tokenizer.ggml.tokens"].data)
    except Exception as exc:  # a truncated file fails deep inside numpy's memmap
        fail(f"{source} is not a whole GGUF file ({type(exc).__name__}: {exc})")
    heads = {"attn_q": meta["llama.attention.head_count"], "attn_k": meta["llama.attention.head_count_kv"]}
    tensors = {}
    for t in reader.tensors:
        name, part = hf_name(t.name)
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if part in heads:
            w = unpermute(w, heads[part])
        tensors[name] = torch.from_numpy(np.ascontiguousarray(w)).to(torch.bfloat16)
    tied = "lm_head.weight" not in tensors
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg = config(meta, tied)
    dump(os.path.join(out, "config.json"), cfg)
    dump(os.path.join(out, "generation_config.json"),
         {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")})
    folder, name = os.path.split(os.path.abspath(source))
    AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out)
    return len(tensors)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail("usage: gguf_llama.py GGUF_PACKAGE_DIR FILE.gguf OUT_DIR")
    sys.path.insert(0, sys.argv[1])
    count = convert(sys.argv[2], sys.argv[3])
    print(f"{count} tensors from {sys.argv[2]} written to {sys.argv[3]}")
