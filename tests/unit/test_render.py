"""The renderer's vLLM flags per version, extraArgs checks, and golden Kubernetes objects."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from kvpilot.catalog.gpus import get_gpu
from kvpilot.catalog.models import resolve_model
from kvpilot.errors import RenderError, SpecError
from kvpilot.pipeline import parse_llmdeployment, render_all
from kvpilot.render.flags import flag_problem, flag_table, flags_diff, flags_for
from kvpilot.render.objects import SPEC_HASH_ANNOTATION, RenderContext, already_applied, dns_label
from kvpilot.render.vllm_args import render_vllm_args
from kvpilot.sizing.planner import plan_resolved
from kvpilot.sizing.settings import resolve_settings
from kvpilot.versions import VersionLine, supported_lines
from tests.conftest import EXAMPLES, ROOT

from .helpers import spec

GOLDEN = ROOT / "tests" / "golden"


def args_for(s):  # type: ignore[no-untyped-def]
    model = resolve_model(s.model.id, s.model.architecture, s.model.architecture_from)
    gpu = get_gpu(s.resources.gpu_type)
    return render_vllm_args(s, plan_resolved(s, model), resolve_settings(s, model, gpu), gpu)


def image(v: str) -> dict[str, str]:
    return {"image": f"vllm/vllm-openai:v{v}"}


def test_prefix_caching_off_switch_follows_the_version() -> None:
    assert "--no-enable-prefix-caching" in args_for(spec(engine={**image("0.27.0"), "prefixCaching": False}))
    assert "--no-enable-prefix-caching" in args_for(spec(engine={**image("0.32.0"), "prefixCaching": False}))
    assert "--disable-prefix-caching" in args_for(spec(engine={**image("0.33.0"), "prefixCaching": False}))


def test_gpu_memory_utilization_default_follows_the_version() -> None:
    old = args_for(spec(engine=image("0.19.0")))
    new = args_for(spec(engine=image("0.33.0")))
    assert old[old.index("--gpu-memory-utilization") + 1] == "0.9"
    assert new[new.index("--gpu-memory-utilization") + 1] == "0.92"


@pytest.mark.parametrize(
    ("flag", "refused", "accepted"),
    [
        ("--disable-log-requests", ["0.18.0", "0.20.0", "0.32.0"], ["0.12.0", "0.16.0", "0.33.0"]),
        ("--swap-space=4", ["0.18.0", "0.33.0"], ["0.8.5", "0.16.0"]),
        ("--num-scheduler-steps=8", ["0.10.0", "0.33.0"], ["0.8.5", "0.9.2"]),
        ("--max-num-active-seqs=4", ["0.27.0"], ["0.32.0", "0.33.0"]),
    ],
)
def test_extra_args_checked_against_each_version(flag: str, refused: list[str], accepted: list[str]) -> None:
    for v in refused:
        with pytest.raises(RenderError) as err:
            args_for(spec(engine={**image(v), "extraArgs": [flag]}))
        assert err.value.path == "spec.engine.extraArgs[0]"
        assert VersionLine.parse(v).__str__() in str(err.value)
    for v in accepted:
        assert flag in args_for(spec(engine={**image(v), "extraArgs": [flag]}))


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--tensor-parallel-size", "2"], "set by kvpilot from spec.resources.gpuCount"),
        (["--max_model_len=4096"], "set by kvpilot from spec.engine.maxModelLen"),
        (["--api-key", "abc"], "use spec.engine.apiKeySecretRef"),
        (["--hf-token=x"], "use spec.model.tokenSecretRef"),
        (["--tokenizer", "hf_abcdefghijklmnopqrstuvwxyz012345"], "looks like a credential"),
        (["--no-such-flag"], "not a flag of any vLLM kvpilot knows"),
        (["--speculative-model", "x"], "removed before vLLM 0.8"),
        (["stray"], "is not a flag"),
        (["--kv-cache-memory-bytes=10G"], "void the sizing plan"),
    ],
)
def test_extra_args_refusals(extra: list[str], needle: str) -> None:
    with pytest.raises(RenderError) as err:
        args_for(spec(engine={"extraArgs": extra}))
    assert needle in str(err.value)


def test_extra_args_with_values_pass_through_in_order() -> None:
    extra = ["--max-loras", "4", "--enable-lora", "--seed=7", "--tool-call-parser", "llama3_json"]
    assert args_for(spec(engine={"extraArgs": extra}))[-len(extra) :] == extra


def test_version_specific_choices() -> None:
    # Choices as each line's own parser lists them (kvpilot/data/vllm_flags).
    with pytest.raises(RenderError, match="block sizes"):
        args_for(spec(engine={**image("0.10.0"), "blockSize": 256}))
    assert "256" in args_for(spec(engine={**image("0.11.0"), "blockSize": 256}))
    assert "48" in args_for(spec(engine={**image("0.20.0"), "blockSize": 48}))
    with pytest.raises(RenderError, match="kvCacheDtype"):
        args_for(spec(engine={**image("0.17.0"), "kvCacheDtype": "float16"}))
    assert "float16" in args_for(spec(engine={**image("0.18.0"), "kvCacheDtype": "float16"}))
    with pytest.raises(RenderError, match="no built-in gguf"):
        args_for(spec("Qwen/Qwen2.5-7B-Instruct-GGUF", engine=image("0.33.0")))
    assert "gguf" in args_for(spec("Qwen/Qwen2.5-7B-Instruct-GGUF", engine=image("0.30.0")))


def test_quantization_flag_picks_marlin_on_ampere_and_plain_kernel_on_turing() -> None:
    a = args_for(spec("Qwen/Qwen2.5-7B-Instruct-AWQ", gpu="L4"))
    assert a[a.index("--quantization") + 1] == "awq_marlin"
    t = args_for(spec("Qwen/Qwen2.5-7B-Instruct-AWQ", gpu="T4", profile="latency"))
    assert t[t.index("--quantization") + 1] == "awq"


def test_unknown_or_unsupported_versions_are_refused() -> None:
    with pytest.raises(SpecError, match="outside the versions"):
        args_for(spec(engine=image("0.7.3")))
    with pytest.raises(SpecError, match="names no vLLM version"):
        args_for(spec(engine={"image": "vllm/vllm-openai:latest"}))
    assert args_for(spec(engine={"image": "registry.local/vllm@sha256:abc", "vllmVersion": "0.30.1"}))


def test_speculative_config_is_json() -> None:
    a = args_for(spec(engine={"speculative": {"method": "ngram", "numSpeculativeTokens": 4, "promptLookupMax": 3}}))
    assert json.loads(a[a.index("--speculative-config") + 1]) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 3,
    }


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_renders_for_every_supported_version(example: Path) -> None:
    """Every flag kvpilot writes for an example exists in every version line it could target."""
    obj = yaml.safe_load(example.read_text())
    for line in supported_lines():
        o = {**obj, "spec": {**obj["spec"], "engine": {**obj["spec"].get("engine", {}), "vllmVersion": f"{line}.0"}}}
        try:
            rendered = render_all(parse_llmdeployment(o).spec, RenderContext("x", "ns", 1))
        except RenderError as exc:
            # Only an honest version refusal is allowed (e.g. fp8 KV choices, gguf), never a crash.
            assert exc.issues and all(i.path.startswith("spec.") for i in exc.issues)
            continue
        known = set(flags_for(line))
        for arg in rendered.vllm_args[1:]:
            if arg.startswith("--"):
                assert arg.split("=")[0] in known, (line, arg)


def test_flag_table_agrees_with_real_vllm_032_parser(shared_dir: Path) -> None:
    """The shipped 0.32 table, made from the sdist without importing vLLM, against a dump of the real parser."""
    dump = json.loads((shared_dir / "fixtures" / "vllm-0.32.0-cli-args.json").read_text())
    table = flag_table(VersionLine(0, 32))
    real = {tuple(a["flags"]): a for a in dump["actions"]}
    ours = {tuple(o["flags"]): o for o in table.options}
    assert set(ours) == set(real)
    for flags, action in real.items():
        option = ours[flags]
        assert option["dest"] == action["dest"], flags
        assert option["deprecated"] == action["deprecated"], flags
        if action["choices"] is not None and "--mm-processor-device" not in flags:  # platform-dependent
            assert option["choices"] == action["choices"], flags
    assert flag_problem("--disable-log-requests", VersionLine(0, 32)) is not None


def test_every_supported_line_has_a_table_recording_how_it_was_made() -> None:
    for line in supported_lines():
        table = flag_table(line)
        assert table.vllm_version.startswith(f"{line}.") and "sha256" in table.method
        assert len(table.options) > 100 and "--max-model-len" in table.by_flag


def test_removed_and_added_flags_say_when_and_what_instead() -> None:
    problem = flag_problem("--swap-space", VersionLine(0, 33))
    assert problem and "removed in 0.18" in problem and "CPU swap" in problem
    assert flag_problem("--swap-space", VersionLine(0, 17)) is None  # the parser still had it
    added = flag_problem("--performance-mode", VersionLine(0, 16))
    assert added and "added in 0.17" in added
    assert flag_problem("--performance-mode", VersionLine(0, 17)) is None
    diff = flags_diff(VersionLine(0, 10), VersionLine(0, 33))
    assert "--swap-space" in diff["removed"] and any(n.startswith("--swap-space:") for n in diff["notes"])


# --------------------------------------------------------------------------------------- objects


def _render_example(path: Path) -> list[dict]:  # type: ignore[type-arg]
    obj = parse_llmdeployment(yaml.safe_load(path.read_text()))
    meta = obj.metadata
    ctx = RenderContext(
        meta["name"], meta["namespace"], obj.spec.replicas, owner_uid="00000000-0000-0000-0000-000000000001"
    )
    return render_all(obj.spec, ctx).objects


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_golden_objects(example: Path) -> None:
    rendered = yaml.safe_dump_all(_render_example(example), sort_keys=True)
    golden = GOLDEN / (example.relative_to(ROOT / "examples").as_posix().replace("/", "__"))
    if os.environ.get("KVPILOT_UPDATE_GOLDEN") == "1":
        golden.write_text(rendered)
    assert golden.exists(), f"no golden file {golden.name}: run with KVPILOT_UPDATE_GOLDEN=1 and review it"
    assert rendered == golden.read_text(), f"{golden.name} differs; if intended, regenerate and review the diff"


def test_deployment_shape() -> None:
    deploy, service = _render_example(ROOT / "examples" / "llama3.1-70b-fp8-h100.yaml")
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert container["command"] == ["vllm", "serve"]
    assert container["args"][0] == "meta-llama/Llama-3.1-70B-Instruct"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][-1]["values"] == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-SXM5-80GB"]
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert next(v for v in pod["volumes"] if v["name"] == "model-cache")["persistentVolumeClaim"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}} in container["env"]
    # 70B fp8 takes minutes to download and load: the startup probe allows for it.
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    assert SPEC_HASH_ANNOTATION in deploy["spec"]["template"]["metadata"]["annotations"]
    assert deploy["metadata"]["ownerReferences"][0]["kind"] == "LLMDeployment"
    assert service["spec"]["ports"][0]["port"] == 8000
    assert service["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]


def test_spec_hash_changes_with_the_pod_and_not_with_replicas() -> None:
    base = spec()
    one = render_all(base, RenderContext("a", "ns", 1)).objects[0]
    three = render_all(base, RenderContext("a", "ns", 3)).objects[0]
    other = render_all(spec(profile="latency"), RenderContext("a", "ns", 1)).objects[0]
    h = lambda d: d["spec"]["template"]["metadata"]["annotations"][SPEC_HASH_ANNOTATION]  # noqa: E731
    assert h(one) == h(three)
    assert h(one) != h(other)


def test_user_affinity_terms_each_get_the_gpu_rule() -> None:
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            }
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }
    deploy = render_all(spec(resources={"gpuType": "L40S", "affinity": aff}), RenderContext("a", "ns", 1)).objects[0]
    pod_aff = deploy["spec"]["template"]["spec"]["affinity"]
    terms = pod_aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][-1]["key"] for t in terms] == ["nvidia.com/gpu.product"] * 2
    assert "podAntiAffinity" in pod_aff


def test_pod_monitor_and_amd_resource() -> None:
    objs = render_all(
        spec("meta-llama/Llama-3.1-8B-Instruct", gpu="MI300X", observability={"podMonitor": True}),
        RenderContext("a", "ns", 1),
    ).objects
    assert [o["kind"] for o in objs] == ["Deployment", "Service", "PodMonitor"]
    limits = objs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"amd.com/gpu": "1"}


def test_dns_label_names() -> None:
    assert dns_label("llama.v3") == "llama-v3"
    assert dns_label("3b") == "m-3b"
    long = dns_label("x" * 200)
    assert len(long) <= 63 and long != dns_label("x" * 199)


def test_non_root_when_asked() -> None:
    deploy = render_all(spec(engine={"runAsUser": 1000}), RenderContext("a", "ns", 1)).objects[0]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    container = pod["containers"][0]
    assert {"name": "HOME", "value": "/home/vllm"} in container["env"]
    assert {"name": "home", "mountPath": "/home/vllm"} in container["volumeMounts"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    default = render_all(spec(), RenderContext("a", "ns", 1)).objects[0]["spec"]["template"]["spec"]
    assert "runAsNonRoot" not in default["securityContext"]


def test_already_applied_is_containment_so_defaults_do_not_force_writes() -> None:
    deploy = _render_example(ROOT / "examples" / "llama3.1-8b-a100.yaml")[0]
    live = json.loads(json.dumps(deploy))
    live["metadata"]["resourceVersion"] = "42"
    live["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"  # a default the API server adds
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log"
    live["status"] = {"readyReplicas": 1}
    assert already_applied(live, deploy)
    drifted = json.loads(json.dumps(live))
    drifted["spec"]["template"]["spec"]["containers"][0]["args"].append("--enforce-eager")
    assert not already_applied(drifted, deploy)  # someone edited the args: apply again
    scaled = json.loads(json.dumps(live))
    scaled["spec"]["replicas"] = 5
    assert not already_applied(scaled, deploy)
    assert not already_applied({**live, "spec": {**live["spec"], "replicas": True}}, {"spec": {"replicas": 1}})
