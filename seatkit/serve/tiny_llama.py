"""Write a tiny Llama model folder: config and a tokenizer trained on this machine's own text.

Run with the runtime venv's Python (it needs `tokenizers`, which vLLM brings); it imports nothing
from seatkit. No weights are written: the seat serves it with `--load-format dummy`.
Usage: python tiny_llama.py OUT_DIR
"""

import glob
import json
import os
import sys
import sysconfig

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # type: ignore[import-not-found]  # the runtime venv's (vLLM's), not the kit's

VOCAB = 4096
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def local_text() -> list[str]:
    """Licence texts and the standard library's modules: on every Debian box with Python."""
    stdlib = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    files += sorted(glob.glob(os.path.join(stdlib, "*.py")))[:200]
    return [f for f in files if os.path.isfile(f)]


def train() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(
        local_text(),
        trainers.BpeTrainer(
            vocab_size=VOCAB,
            special_tokens=SPECIAL,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return tok


def dump(path: str, data: dict) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2)


def write(out: str, tok: Tokenizer) -> None:
    os.makedirs(out, exist_ok=True)
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    tok.save(os.path.join(out, "tokenizer.json"))
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    dump(os.path.join(out, "special_tokens_map.json"), specials)
    dump(
        os.path.join(out, "tokenizer_config.json"),
        {
            **specials,
            "tokenizer_class": "PreTrainedTokenizerFast",
            "add_bos_token": False,
            "model_max_length": 4096,
            "chat_template": CHAT_TEMPLATE,
        },
    )
    token_ids = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"]}
    # head_dim 32 is one the CPU attention backend supports.
    dump(
        os.path.join(out, "config.json"),
        {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 128,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "head_dim": 32,
            "vocab_size": VOCAB,
            "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            **token_ids,
        },
    )
    dump(os.path.join(out, "generation_config.json"), token_ids)


if __name__ == "__main__":
    tokenizer = train()
    write(sys.argv[1], tokenizer)
    print(f"tiny Llama written to {sys.argv[1]} (vocabulary {tokenizer.get_vocab_size()})")
