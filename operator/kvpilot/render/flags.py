"""What each vLLM release line accepts on its command line.

The table records, per flag, the release lines where the flag exists, how it takes a value, and
what replaced it.  Sources: vLLM's own argument parsers read from released wheels (see
``../shared/notes/vllm-facts.md`` in the development workspace); lines between two checked
releases are assumed to behave like the nearer checked neighbour.  It is deliberately a refusal
list as much as an allow list: rendering a flag a version removed is how other operators
crash-loop pods (``--disable-log-requests`` on 0.18–0.32, for example).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpilot.versions import NEWEST_SUPPORTED, OLDEST_SUPPORTED, VersionLine

_V = VersionLine.parse


@dataclass(frozen=True)
class FlagRecord:
    names: tuple[str, ...]
    takes_value: bool = True
    since: str = "0.8"
    until: str | None = None  # last release line that has it; None: still present
    also_since: str | None = None  # reintroduced from this line (e.g. as an auto-generated negative)
    replacement: str = ""

    def present_in(self, line: VersionLine) -> bool:
        if _V(self.since) <= line and (self.until is None or line <= _V(self.until)):
            return True
        return self.also_since is not None and _V(self.also_since) <= line


def _f(*names: str, **kw: object) -> FlagRecord:
    return FlagRecord(names=names, **kw)  # type: ignore[arg-type]


FLAGS: tuple[FlagRecord, ...] = (
    # Serving and model
    _f("--model"),
    _f("--served-model-name"),
    _f("--host"),
    _f("--port"),
    _f("--api-key"),
    _f("--revision"),
    _f("--code-revision"),
    _f("--tokenizer"),
    _f("--tokenizer-revision"),
    _f("--tokenizer-mode"),
    _f("--download-dir"),
    _f("--load-format"),
    _f("--dtype"),
    _f("--trust-remote-code", takes_value=False),
    _f("--seed"),
    _f("--max-model-len"),
    _f("--hf-overrides"),
    _f("--generation-config"),
    _f("--override-generation-config"),
    _f("--chat-template"),
    _f("--max-logprobs"),
    _f("--enable-auto-tool-choice", takes_value=False),
    _f("--tool-call-parser"),
    _f("--reasoning-parser"),
    _f("--limit-mm-per-prompt"),
    _f("--uvicorn-log-level"),
    _f("--root-path"),
    _f("--allowed-origins"),
    _f("--disable-fastapi-docs", takes_value=False),
    _f("--enable-prompt-tokens-details", takes_value=False),
    _f("--return-tokens-as-token-ids", takes_value=False),
    _f("--disable-log-stats", takes_value=False),
    _f("--otlp-traces-endpoint"),
    # Parallelism
    _f("--tensor-parallel-size", "-tp"),
    _f("--pipeline-parallel-size", "-pp"),
    _f("--data-parallel-size", "-dp"),
    _f("--distributed-executor-backend"),
    _f("--enable-expert-parallel", takes_value=False),
    _f("--disable-custom-all-reduce", takes_value=False),
    # Memory and cache
    _f("--gpu-memory-utilization"),
    _f("--device-memory-utilization", since="0.32"),
    _f("--kv-cache-memory-bytes", since="0.10"),
    _f("--num-gpu-blocks-override"),
    _f("--cpu-offload-gb"),
    _f("--block-size"),
    _f("--kv-cache-dtype"),
    _f("--enable-prefix-caching", takes_value=False),
    _f("--no-enable-prefix-caching", takes_value=False),
    _f("--disable-prefix-caching", takes_value=False, since="0.33"),
    _f("--enforce-eager", takes_value=False),
    _f("--swap-space", until="0.16", replacement="removed in 0.18 (no CPU swap in the V1 engine); drop it"),
    _f("--max-seq-len-to-capture", until="0.10", replacement="removed in 0.11; drop it"),
    # Quantization
    _f("--quantization", "-q"),
    # Scheduler
    _f("--max-num-seqs"),
    _f("--max-num-batched-tokens"),
    _f("--max-num-active-seqs", since="0.32"),
    _f("--max-num-queued-reqs", since="0.32"),
    _f("--max-num-queued-tokens", since="0.32"),
    _f("--performance-mode", since="0.32"),
    _f("--enable-chunked-prefill", takes_value=False),
    _f("--no-enable-chunked-prefill", takes_value=False),
    _f("--disable-chunked-prefill", takes_value=False, since="0.33"),
    _f("--long-prefill-token-threshold"),
    # Absent from vLLM 0.32.0's parser; the line that dropped it is not pinned down yet.
    _f("--max-num-partial-prefills", until="0.31", replacement="absent from 0.32 on; drop it"),
    _f("--scheduling-policy"),
    _f("--preemption-mode", until="0.10", replacement="removed in 0.11; drop it"),
    _f("--scheduler-delay-factor", until="0.10", replacement="removed in 0.11; drop it"),
    _f("--num-scheduler-steps", until="0.9", replacement="removed in 0.10 (multi-step scheduling is gone)"),
    _f("--multi-step-stream-outputs", until="0.9", replacement="removed in 0.10"),
    _f("--use-v2-block-manager", takes_value=False, until="0.9", replacement="a no-op since 0.6, removed in 0.10"),
    _f("--tokenizer-pool-size", until="0.9", replacement="removed in 0.10"),
    _f("--tokenizer-pool-type", until="0.9", replacement="removed in 0.10"),
    # Speculative decoding
    _f("--speculative-config", "-sc"),
    # LoRA
    _f("--enable-lora", takes_value=False),
    _f("--max-loras"),
    _f("--max-lora-rank"),
    _f("--max-cpu-loras"),
    _f("--lora-modules"),
    # Logging
    _f("--enable-log-requests", takes_value=False, since="0.10"),
    _f("--no-enable-log-requests", takes_value=False, since="0.10"),
    _f(
        "--disable-log-requests",
        takes_value=False,
        until="0.16",
        also_since="0.33",
        replacement="absent from 0.18 to 0.32 (request logging is off by default since 0.10); drop it",
    ),
    _f("--hf-token"),
)

# Flags removed before the oldest line kvpilot supports, with what replaced them.
REMOVED_BEFORE_SUPPORT: dict[str, str] = {
    "--speculative-model": "use --speculative-config (spec.engine.speculative)",
    "--num-speculative-tokens": "use --speculative-config (spec.engine.speculative)",
    "--worker-use-ray": "use --distributed-executor-backend ray",
}

_BY_NAME: dict[str, FlagRecord] = {name: rec for rec in FLAGS for name in rec.names}


def flag_record(name: str) -> FlagRecord | None:
    return _BY_NAME.get(name.replace("_", "-") if name.startswith("--") else name)


def flag_problem(name: str, line: VersionLine) -> str | None:
    """Why vLLM ``line`` would refuse ``name``, or None if it accepts it."""
    if name in REMOVED_BEFORE_SUPPORT:
        return f"{name} was removed before vLLM {OLDEST_SUPPORTED}: {REMOVED_BEFORE_SUPPORT[name]}"
    record = flag_record(name)
    if record is None:
        covered = f"{OLDEST_SUPPORTED}–{NEWEST_SUPPORTED}"
        return f"{name} is not a flag kvpilot knows for vLLM {line} (kvpilot's table covers {covered})"
    if not record.present_in(line):
        if _V(record.since) > line:
            return f"{name} does not exist in vLLM {line} (added in {record.since})"
        return f"{name} is not accepted by vLLM {line}: {record.replacement or 'removed'}"
    return None


def flags_for(line: VersionLine) -> list[str]:
    return sorted(name for rec in FLAGS if rec.present_in(line) for name in rec.names)


def negative_flag(feature: str, line: VersionLine) -> str:
    """The off switch of a boolean feature: ``--no-enable-X`` up to 0.32, ``--disable-X`` from 0.33."""
    return f"--disable-{feature}" if line >= _V("0.33") else f"--no-enable-{feature}"


def block_size_choices(line: VersionLine) -> tuple[int, ...] | None:
    """Allowed --block-size values, or None when any positive integer is accepted (0.18 on)."""
    if line <= _V("0.11"):
        return (1, 8, 16, 32, 64, 128)
    if line <= _V("0.17"):
        return (1, 8, 16, 32, 64, 128, 256)
    return None


def kv_cache_dtype_choices(line: VersionLine) -> tuple[str, ...]:
    choices = ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]
    if line >= _V("0.10"):
        choices.append("fp8_inc")
    if line >= _V("0.11"):
        choices.append("bfloat16")
    if line >= _V("0.21"):
        choices.append("float16")
    return tuple(choices)


def quantization_methods(line: VersionLine) -> tuple[str, ...]:
    """The --quantization values kvpilot renders that ``line`` has built in.

    gguf and bitsandbytes were checked present in 0.10 and 0.12 and absent in 0.33 (vLLM moved GGUF to a
    plugin); lines between are assumed to still have them.
    """
    methods = ["fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors"]
    if line <= _V("0.32"):
        methods += ["bitsandbytes", "gguf"]
    return tuple(methods)


def flags_diff(old: VersionLine, new: VersionLine) -> dict[str, list[str]]:
    """What changed on the command line between two release lines: added, removed, and (for removed
    flags) what replaced them."""
    before, after = set(flags_for(old)), set(flags_for(new))
    removed = sorted(before - after)
    notes = []
    for name in removed:
        record = flag_record(name)
        if record and record.replacement:
            notes.append(f"{name}: {record.replacement}")
    return {"added": sorted(after - before), "removed": removed, "notes": notes}
