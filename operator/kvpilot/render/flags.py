"""What each vLLM release line accepts on its command line, from vLLM's own parser.

The tables in ``kvpilot/data/vllm_flags/<line>.json`` are made by ``hack/vllm/extract_flags.py`` from each
release's published source (read, never imported): every option string of the ``vllm serve`` parser
with its action, type, choices and deprecation. The 0.32 table matches a dump of the real 0.32.0
parser option for option (``tests/unit/test_render.py``), and the live tier checks the rendered
command lines against a running vLLM. This module only adds what a parser cannot say: what replaced a
removed flag. Rendering a flag a version removed is how other operators crash-loop pods
(``--disable-log-requests`` in 0.17-0.32, for example), so the tables are a refusal list as much as an
allow list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from kvpilot.versions import NEWEST_SUPPORTED, OLDEST_SUPPORTED, VersionLine, supported_lines

_V = VersionLine.parse
# argparse actions that take no value on the command line.
_NO_VALUE_ACTIONS = {
    "_StoreTrueAction",
    "_StoreFalseAction",
    "_StoreConstAction",
    "_CountAction",
    "_HelpAction",
    "_VersionAction",
    "BooleanOptionalAction",
    "EnableDisableAction",
}

# What to do instead of a flag a release removed (the parser tables say that it went, not why).
REPLACEMENTS: dict[str, str] = {
    "--swap-space": "no CPU swap in the V1 engine; drop it",
    "--max-seq-len-to-capture": "CUDA graphs are sized by compilation config now; drop it",
    "--max-num-partial-prefills": "drop it",
    "--preemption-mode": "V1 always preempts by recompute; drop it",
    "--scheduler-delay-factor": "drop it",
    "--num-scheduler-steps": "multi-step scheduling is gone; drop it",
    "--multi-step-stream-outputs": "multi-step scheduling is gone; drop it",
    "--use-v2-block-manager": "a no-op since 0.6; drop it",
    "--tokenizer-pool-size": "drop it",
    "--tokenizer-pool-type": "drop it",
    "--disable-log-requests": "request logging is off by default since 0.10 (--enable-log-requests turns it on)",
}
# Flags removed before the oldest line kvpilot supports, with what replaced them.
REMOVED_BEFORE_SUPPORT: dict[str, str] = {
    "--speculative-model": "use --speculative-config (spec.engine.speculative)",
    "--num-speculative-tokens": "use --speculative-config (spec.engine.speculative)",
    "--worker-use-ray": "use --distributed-executor-backend ray",
}


@dataclass(frozen=True)
class FlagTable:
    line: VersionLine
    vllm_version: str
    method: str
    options: tuple[dict[str, Any], ...]

    @property
    def by_flag(self) -> dict[str, dict[str, Any]]:
        return _index(self.line)

    def option(self, name: str) -> dict[str, Any] | None:
        return self.by_flag.get(name)


@cache
def _index(line: VersionLine) -> dict[str, dict[str, Any]]:
    return {flag: option for option in flag_table(line).options for flag in option["flags"]}


@cache
def flag_table(line: VersionLine) -> FlagTable:
    text = resources.files("kvpilot").joinpath(f"data/vllm_flags/{line}.json").read_text()
    data = json.loads(text)
    return FlagTable(line, data["vllm_version"], data["method"], tuple(data["options"]))


def _normalise(name: str) -> str:
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def takes_value(name: str, line: VersionLine) -> bool:
    option = flag_table(line).option(_normalise(name))
    if option is None:
        return False
    return option["action"] not in _NO_VALUE_ACTIONS and option.get("nargs") != 0


def flag_problem(name: str, line: VersionLine) -> str | None:
    """Why vLLM ``line`` would refuse ``name``, or None if its parser accepts it."""
    name = _normalise(name)
    if name in REMOVED_BEFORE_SUPPORT:
        return f"{name} was removed before vLLM {OLDEST_SUPPORTED}: {REMOVED_BEFORE_SUPPORT[name]}"
    if flag_table(line).option(name) is not None:
        return None
    lines = supported_lines()
    has = [other for other in lines if flag_table(other).option(name) is not None]
    if not has:
        covered = f"{OLDEST_SUPPORTED}–{NEWEST_SUPPORTED}"
        return f"{name} is not a flag of any vLLM kvpilot knows ({covered})"
    later = [other for other in has if other > line]
    earlier = [other for other in has if other < line]
    if earlier:
        gone = min(other for other in lines if other > max(earlier) and flag_table(other).option(name) is None)
        note = REPLACEMENTS.get(name, "drop it")
        back = f"; back in {min(later)}" if later else ""
        return f"{name} is not accepted by vLLM {line}: removed in {gone}{back} ({note})"
    return f"{name} does not exist in vLLM {line} (added in {min(later)})"


def flags_for(line: VersionLine) -> list[str]:
    return sorted(flag_table(line).by_flag)


def negative_flag(feature: str, line: VersionLine) -> str:
    """The off switch of a boolean feature: ``--no-enable-X`` up to 0.32, ``--disable-X`` from 0.33."""
    for candidate in (f"--disable-{feature}", f"--no-enable-{feature}"):
        option = flag_table(line).option(candidate)
        if option is not None and option["action"] in _NO_VALUE_ACTIONS:
            return candidate
    return f"--no-enable-{feature}"


def _choices(flag: str, line: VersionLine) -> list[Any] | None:
    """The option's choices in ``line``; when the parser only shows a metavar (vLLM validates later),
    the choices of the nearest older line that listed them."""
    for other in sorted((x for x in supported_lines() if x <= line), reverse=True):
        option = flag_table(other).option(flag)
        if option is not None and option.get("choices"):
            return [c for c in option["choices"] if c is not None]
    return None


def block_size_choices(line: VersionLine) -> tuple[int, ...] | None:
    """Allowed --block-size values, or None when the parser takes any integer."""
    option = flag_table(line).option("--block-size")
    if option is None or not option.get("choices"):
        return None
    return tuple(int(c) for c in option["choices"] if c is not None)


def kv_cache_dtype_choices(line: VersionLine) -> tuple[str, ...]:
    return tuple(str(c) for c in _choices("--kv-cache-dtype", line) or ["auto"])


def quantization_methods(line: VersionLine) -> tuple[str, ...]:
    """The --quantization values kvpilot renders that ``line`` has built in.

    Where the parser lists choices they decide; newer lines only show a metavar, and there the methods
    follow vLLM's quantization registry (gguf and bitsandbytes left it in 0.33 for plugins).
    """
    rendered = ["fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "bitsandbytes", "gguf"]
    option = flag_table(line).option("--quantization")
    if option is not None and option.get("choices"):
        return tuple(m for m in rendered if m in option["choices"])
    if line >= _V("0.33"):
        rendered = [m for m in rendered if m not in ("bitsandbytes", "gguf")]
    return tuple(rendered)


def flags_diff(old: VersionLine, new: VersionLine) -> dict[str, list[str]]:
    """What changed on the command line between two release lines: added, removed, and what replaced
    the removed ones."""
    before, after = set(flags_for(old)), set(flags_for(new))
    removed = sorted(before - after)
    notes = [f"{name}: {REPLACEMENTS[name]}" for name in removed if name in REPLACEMENTS]
    return {"added": sorted(after - before), "removed": removed, "notes": notes}
