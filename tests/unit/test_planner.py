"""The planner's decisions and its refusals."""

from __future__ import annotations

import pytest

from kvpilot.catalog.models import lookup_model, resolve_model
from kvpilot.errors import DoesNotFitError, SpecError
from kvpilot.sizing.planner import plan_resolved, valid_tensor_parallel

from .helpers import spec


def plan(s):  # type: ignore[no-untyped-def]
    return plan_resolved(s, resolve_model(s.model.id, s.model.architecture, s.model.architecture_from))


def test_llama3_8b_fits_one_h100() -> None:
    p = plan(spec())
    assert (p.tensor_parallel_size, p.gpus_per_replica) == (1, 1)
    assert p.kv_bytes_per_token == 128 * 1024
    assert p.max_concurrency >= p.demand_sequences
    assert p.rejected == []


def test_llama3_70b_fp16_on_h100_picks_tp4_and_says_why_not_2() -> None:
    p = plan(spec("meta-llama/Meta-Llama-3-70B-Instruct", model={"dtype": "float16"}))
    assert p.tensor_parallel_size == 4
    reasons = {r.tensor_parallel_size: r.reason for r in p.rejected}
    assert set(reasons) == {1, 2}
    assert "more than the" in reasons[1]  # weights alone overflow one GPU
    assert "of the 32 sequences" in reasons[2]  # weights fit two, the KV demand does not
    assert any("TP 2 rejected" in line for line in p.explanation)


def test_smaller_demand_lets_70b_run_on_two_gpus() -> None:
    p = plan(spec("meta-llama/Meta-Llama-3-70B-Instruct", sizing={"concurrentSequences": 2}))
    assert p.tensor_parallel_size == 2


def test_explicit_gpu_count_is_respected() -> None:
    p = plan(spec(resources={"gpuType": "H100-80GB-SXM", "gpuCount": 2}))
    assert p.tensor_parallel_size == 2


def test_tensor_parallel_must_divide_heads() -> None:
    qwen = lookup_model("Qwen/Qwen2.5-7B-Instruct").architecture  # type: ignore[union-attr]
    assert valid_tensor_parallel(qwen, 4) is None
    assert "does not divide the 28 attention heads" in (valid_tensor_parallel(qwen, 8) or "")
    with pytest.raises(SpecError) as err:
        plan(spec("meta-llama/Meta-Llama-3-70B-Instruct", resources={"gpuType": "H100-80GB-SXM", "gpuCount": 3}))
    assert err.value.path == "spec.resources.gpuCount"
    assert "64 attention heads" in str(err.value)


def test_gpu_count_beyond_a_node_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        plan(spec(resources={"gpuType": "L4", "gpuCount": 8, "gpusPerNode": 4}))
    assert err.value.path == "spec.resources.gpuCount"


def test_405b_fp16_does_not_fit_a_node_and_fixes_come_in_order() -> None:
    with pytest.raises(DoesNotFitError) as err:
        plan(spec("meta-llama/Llama-3.1-405B-Instruct"))
    e = err.value
    assert "does not fit 8 × H100-80GB-SXM" in str(e)
    assert "GiB more than the" in str(e)  # by how much
    titles = [f.title for f in e.fixes]
    assert titles[0].startswith("8-bit weights")
    assert any(t.startswith("4-bit weights") for t in titles)
    assert titles.index(next(t for t in titles if t.startswith("4-bit"))) > 0
    assert any("H200" in t or "B200" in t or "MI300X" in t for t in titles)
    # every fix carries its numbers
    assert all("KV tokens" in f.detail for f in e.fixes)


def test_fix_order_is_8bit_context_4bit_fewer_bigger() -> None:
    order = ["8-bit weights", "shorter context", "4-bit weights", "fewer concurrent", "a bigger GPU", "more GPUs"]
    with pytest.raises(DoesNotFitError) as err:
        plan(
            spec(
                "meta-llama/Llama-3.1-8B-Instruct",
                gpu="L4",
                engine={"maxModelLen": 32768, "maxNumSeqs": 16},
                resources={"gpuType": "L4", "gpuCount": 1},
            )
        )
    ranks = [next(i for i, o in enumerate(order) if f.title.startswith(o)) for f in err.value.fixes]
    assert len(ranks) >= 4
    assert ranks == sorted(ranks)


def test_max_model_len_beyond_model_limit_is_a_field_error() -> None:
    with pytest.raises(SpecError) as err:
        plan(spec("microsoft/Phi-3-mini-4k-instruct", engine={"maxModelLen": 8192}))
    assert err.value.path == "spec.engine.maxModelLen"
    assert "4096" in str(err.value)


def test_profile_context_is_capped_by_the_model_with_a_note() -> None:
    p = plan(spec("microsoft/Phi-3-mini-4k-instruct", profile="balanced"))
    assert p.max_model_len == 4096
    assert any("capped" in n for n in p.notes)


def test_profiles_set_batching_and_engine_fields_override_them() -> None:
    lat = plan(spec(profile="latency"))
    thr = plan(spec(profile="throughput"))
    bal = plan(spec(profile="balanced"))
    assert (lat.max_num_seqs, lat.max_model_len, lat.max_num_batched_tokens) == (8, 4096, 512)
    assert (bal.max_num_seqs, bal.max_model_len, bal.max_num_batched_tokens) == (32, 8192, 1024)
    assert (thr.max_num_seqs, thr.max_model_len, thr.max_num_batched_tokens) == (64, 2048, 2048)
    over = plan(spec(profile="latency", engine={"maxNumSeqs": 4}))
    assert (over.max_num_seqs, over.max_model_len) == (4, 4096)


def test_bf16_on_t4_is_refused_when_explicit_and_downgraded_when_auto() -> None:
    with pytest.raises(SpecError) as err:
        plan(spec("meta-llama/Llama-3.2-3B-Instruct", gpu="T4", model={"dtype": "bfloat16"}))
    assert err.value.path == "spec.model.dtype"
    p = plan(spec("meta-llama/Llama-3.2-3B-Instruct", gpu="T4", profile="latency"))
    assert p.dtype == "float16"


def test_awq_needs_an_awq_checkpoint() -> None:
    with pytest.raises(SpecError) as err:
        plan(spec("meta-llama/Meta-Llama-3-8B-Instruct", model={"quantization": "awq"}))
    assert err.value.path == "spec.model.quantization"
    p = plan(spec("Qwen/Qwen2.5-7B-Instruct-AWQ", gpu="L4"))
    assert p.quantization == "awq"  # carried by the checkpoint even though the spec said none


def test_unknown_model_names_the_ways_out() -> None:
    with pytest.raises(SpecError) as err:
        plan(spec("acme/private-llm"))
    assert err.value.path == "spec.model.id"
    assert "architectureFrom" in str(err.value)
    p = plan(spec("acme/private-llm", model={"architectureFrom": "meta-llama/Llama-3.1-8B-Instruct"}))
    assert p.kv_bytes_per_token == 128 * 1024


def test_bigger_demand_needs_more_gpus_monotonically() -> None:
    sizes = [
        plan(spec("meta-llama/Meta-Llama-3-70B-Instruct", sizing={"concurrentSequences": n})).tensor_parallel_size
        for n in (1, 16, 64)
    ]
    assert sizes == sorted(sizes)
    assert sizes[0] < sizes[-1]


def test_plan_status_round_trips() -> None:
    st = plan(spec()).status()
    assert st.gpus_per_replica == 1 and st.kv_bytes_per_token == 131072
    assert st.explanation and st.wire()["kvCacheTokens"] > 0
