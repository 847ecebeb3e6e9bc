#!/usr/bin/env python3
"""Write a tiny, randomly initialised Llama model plus a tokenizer to a directory.

Nothing is downloaded: the tokenizer is a byte-level BPE trained locally on a
small built-in corpus with the `tokenizers` library, and the weights come from
`LlamaForCausalLM(config)` with a fixed seed, saved as safetensors.

Usage (with the venv made by setup.sh):
    ~/.cache/kvpilot/vllm-0.32.0/bin/python hack/vllm/live/make_tiny_model.py [OUT_DIR]

OUT_DIR defaults to $KVPILOT_TINY_MODEL or ~/.cache/kvpilot/tiny-llama.
Idempotent: if OUT_DIR already holds a complete model it does nothing
(pass --force to rebuild).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

VOCAB_SIZE = 512
HIDDEN = 128
LAYERS = 2
HEADS = 4  # head_dim 32: a size vLLM's CPU attention backend supports
KV_HEADS = 2
INTERMEDIATE = 256
MAX_POS = 512
SEED = 1234

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]

# A small, fixed corpus so the learned merges (and so the tokenizer) are reproducible.
_CORPUS_LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! This is a tiny model served by vLLM on a CPU.",
    "Kubernetes operators reconcile desired state with observed state.",
    "Requests wait in a queue until the scheduler admits them to a batch.",
    "The key value cache holds attention keys and values for each token.",
    "Once upon a time there was a small language model with two layers.",
    "Metrics: queue time, cache usage, running requests, waiting requests.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 100 1000",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "def main(): return {'status': 'ok', 'tokens': [1, 2, 3]}",
]


def _corpus():
    for _ in range(20):
        yield from _CORPUS_LINES


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    bos_id = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=MAX_POS,
    )
    # A minimal chat template so /v1/chat/completions also works.
    fast.chat_template = (
        "{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n"
        "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    )
    return fast


def build_model(tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    return model


def is_complete(out: Path) -> bool:
    return (out / ".complete").is_file()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = os.environ.get("KVPILOT_TINY_MODEL", str(Path.home() / ".cache/kvpilot/tiny-llama"))
    p.add_argument("out", nargs="?", default=default)
    p.add_argument("--force", action="store_true", help="rebuild even if the directory is complete")
    args = p.parse_args(argv)
    out = Path(args.out).expanduser()

    if is_complete(out) and not args.force:
        print(f"[tiny-model] already complete: {out}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / ".complete").unlink(missing_ok=True)

    print(f"[tiny-model] building tokenizer (byte-level BPE, vocab {VOCAB_SIZE})", flush=True)
    tok = build_tokenizer()
    tok.save_pretrained(out)
    print(
        f"[tiny-model] building LlamaForCausalLM: layers={LAYERS} hidden={HIDDEN} "
        f"heads={HEADS} kv_heads={KV_HEADS} vocab={len(tok)} seed={SEED}",
        flush=True,
    )
    model = build_model(tok)
    model.save_pretrained(out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    files = sorted(f.name for f in out.iterdir())
    if not any(f.endswith(".safetensors") for f in files):
        print("[tiny-model] ERROR: no .safetensors file was written", file=sys.stderr)
        return 1
    (out / ".complete").write_text(json.dumps({"params": n, "files": files}) + "\n")
    print(f"[tiny-model] wrote {n} parameters to {out}: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
