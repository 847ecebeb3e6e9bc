"""Every catalogued bad input through `kvpilot plan` and `kvpilot render`: a non-zero exit, one line naming
the field, never a traceback. And a property: any spec the model accepts plans or fails cleanly."""

from __future__ import annotations

import io
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvpilot.cli import main
from kvpilot.errors import SpecError
from kvpilot.pipeline import parse_spec, render_all
from kvpilot.render.objects import RenderContext
from tests.bad_inputs import CASES, SENTINEL_TOKEN, BadInput


def run_cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse exits this way
            code = int(exc.code or 0)
        except Exception:
            return -1, traceback.format_exc()
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
@pytest.mark.parametrize("command", ["plan", "render"])
def test_cli_refuses_with_the_field_path(case: BadInput, command: str, tmp_path: Path) -> None:
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(yaml.safe_dump(case.build(case.id)))
    code, output = run_cli(command, "-f", str(path))
    assert code in (2, 3), f"{case.id}: exit {code}\n{output[:2000]}"
    assert "Traceback" not in output
    assert case.field in output, output[:500]
    assert SENTINEL_TOKEN not in output  # a literal secret is refused without being echoed


def test_catalogue_is_broad() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.caught_by for c in CASES} == {"admission", "planner"}


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./_:", min_size=1, max_size=40)
specs = st.fixed_dictionaries(
    {
        "model": st.fixed_dictionaries(
            {
                "id": st.one_of(
                    st.sampled_from(
                        [
                            "meta-llama/Llama-3.1-8B-Instruct",
                            "Qwen/Qwen2.5-7B-Instruct-AWQ",
                            "mistralai/Mixtral-8x7B-Instruct-v0.1",
                            "deepseek-ai/DeepSeek-V2-Lite-Chat",
                        ]
                    ),
                    names,
                )
            },
            optional={
                "quantization": st.sampled_from(["none", "awq", "gptq", "fp8", "int8", "bitsandbytes", "gguf"]),
                "dtype": st.sampled_from(["auto", "float16", "bfloat16", "float32"]),
            },
        ),
        "resources": st.fixed_dictionaries(
            {
                "gpuType": st.sampled_from(
                    ["T4", "L4", "A10G", "L40S", "A100-80GB", "H100-80GB-SXM", "H200", "MI300X", "H900"]
                )
            },
            optional={"gpuCount": st.one_of(st.integers(-2, 70), st.just("auto"), st.text(max_size=4))},
        ),
    },
    optional={
        "profile": st.sampled_from(["latency", "balanced", "throughput", "other"]),
        "replicas": st.integers(-5, 2000),
        "engine": st.fixed_dictionaries(
            {},
            optional={
                "maxModelLen": st.integers(-10, 2_000_000),
                "maxNumSeqs": st.integers(-1, 5000),
                "maxNumBatchedTokens": st.integers(0, 2_000_000),
                "blockSize": st.integers(0, 2048),
                "gpuMemoryUtilization": st.one_of(st.floats(-1, 2), st.just(float("nan"))),
                "kvCacheDtype": st.sampled_from(["auto", "fp8", "float16", "int4"]),
                "vllmVersion": st.sampled_from(["0.8.5", "0.10.2", "0.20.0", "0.33.0", "0.5.0", "1.0.0", "x"]),
                "extraArgs": st.lists(st.text(max_size=30), max_size=4),
            },
        ),
        "autoscaling": st.fixed_dictionaries(
            {"enabled": st.booleans()},
            optional={"minReplicas": st.integers(-1, 50), "maxReplicas": st.integers(-1, 50)},
        ),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs)
def test_any_spec_plans_or_fails_with_a_field_path(spec: dict[str, Any]) -> None:
    try:
        parsed = parse_spec(spec)
        rendered = render_all(parsed, RenderContext("p", "ns", 1))
    except SpecError as exc:
        text = str(exc)
        assert text and "spec" in text, text
        return
    assert rendered.plan.gpus_per_replica >= 1 and rendered.plan.kv_cache_tokens > 0
    assert rendered.objects[0]["kind"] == "Deployment"
