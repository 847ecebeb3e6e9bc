"""The kvpilot command line: plan, render, crd, catalog and (with the operator) run.

Every failure a user can cause ends in one line per problem, naming the field, and a non-zero exit:
2 for an invalid spec, 3 when the model does not fit, 1 for anything else.  Never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import yaml

from kvpilot.api.crd import all_crds_yaml, crd_files
from kvpilot.catalog.gpus import gpu_catalog
from kvpilot.catalog.models import ResolvedModel, load_local_config, model_catalog
from kvpilot.errors import DoesNotFitError, KvpilotError, SpecError
from kvpilot.pipeline import parse_llmdeployment, render_all
from kvpilot.render.objects import RenderContext
from kvpilot.sizing.estimator import count_parameters, kv_layout

EXIT_SPEC = 2
EXIT_DOES_NOT_FIT = 3
MIN_PEERING_LIFETIME = 15  # seconds


def _documents(path: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    if path is None:
        text = resources.files("kvpilot").joinpath("data/examples/default.yaml").read_text()
        source = "embedded default (kvpilot/data/examples/default.yaml)"
    elif path == "-":
        text, source = sys.stdin.read(), "stdin"
    else:
        try:
            text, source = Path(path).read_text(), path
        except OSError as exc:
            raise SpecError(f"cannot read {path}: {exc.strerror}", path="") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{source} is not valid YAML{where}: {getattr(exc, 'problem', exc)}", path="") from None
    if not docs:
        raise SpecError(f"{source} holds no document", path="")
    for i, doc in enumerate(docs):
        yield (source if len(docs) == 1 else f"{source}#{i + 1}"), doc


def _override_model(args: argparse.Namespace, model_id: str, revision: str | None) -> ResolvedModel | None:
    if args.config:
        return load_local_config(args.config)
    if args.hub:
        from kvpilot.catalog.hub import fetch_hub_config

        return fetch_hub_config(model_id, revision, token=os.environ.get("HF_TOKEN"))
    return None


def _each(args: argparse.Namespace, out: TextIO, emit: Callable[..., None]) -> None:
    for source, doc in _documents(args.file):
        obj = parse_llmdeployment(doc)
        meta = obj.metadata or {}
        ctx = RenderContext(
            name=str(meta.get("name", "llmdeployment")),
            namespace=args.namespace or str(meta.get("namespace", "default")),
            replicas=obj.spec.replicas if not obj.spec.autoscaling.enabled else obj.spec.autoscaling.min_replicas,
        )
        model = _override_model(args, obj.spec.model.id, obj.spec.model.revision)
        emit(source, ctx, render_all(obj.spec, ctx, model), out)


def _plan_table(source: str, ctx: RenderContext, rendered: Any, out: TextIO) -> None:
    p = rendered.plan
    gib = 1024**3
    overhead = p.non_torch_bytes_per_gpu + p.activation_bytes_per_gpu + p.cuda_graph_bytes_per_gpu
    rows = [
        ("LLMDeployment", f"{ctx.namespace}/{ctx.name}  ({source})"),
        ("model", f"{p.model}  [{p.model_source}]"),
        ("vLLM", f"{p.vllm_version}, profile {p.profile}"),
        (
            "weights",
            f"{p.quantization if p.quantization != 'none' else p.dtype}, {p.weights_bytes_total / gib:.2f} GiB",
        ),
        ("GPUs per replica", f"{p.gpus_per_replica} × {p.gpu_type} (tensor-parallel {p.tensor_parallel_size})"),
        (
            "per GPU",
            f"budget {p.budget_bytes_per_gpu / gib:.2f} GiB = weights {p.weights_bytes_per_gpu / gib:.2f} "
            f"+ overhead {overhead / gib:.2f}"
            f" + KV cache {p.kv_cache_bytes_per_gpu / gib:.2f} GiB",
        ),
        ("KV per token", f"{p.kv_bytes_per_token / 1024:g} KiB ({p.kv_cache_dtype})"),
        ("KV cache", f"{p.kv_cache_tokens:,} tokens ({p.kv_cache_blocks:,} blocks of {p.block_size})"),
        (
            "max context",
            f"{p.max_model_len} tokens; batch {p.max_num_seqs} seqs, step {p.max_num_batched_tokens} tokens",
        ),
        (
            "concurrency",
            f"{p.max_concurrency:.1f} × {p.demand_tokens_per_sequence}-token sequences "
            f"(asked {p.demand_sequences}, headroom {p.headroom_percent:+.0f} %)",
        ),
        ("cold start", f"~{p.estimated_startup_seconds} s estimated"),
        ("endpoint", rendered.endpoint),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"{key:<{width}}  {value}\n")
    out.write("\nhow:\n")
    for line in p.explanation:
        out.write(f"  - {line}\n")
    out.write("\nvllm serve " + " ".join(_shell_quote(a) for a in rendered.vllm_args) + "\n\n")


def _shell_quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def cmd_plan(args: argparse.Namespace, out: TextIO) -> None:
    if args.output == "table":
        _each(args, out, _plan_table)
        return
    plans: list[dict[str, Any]] = []
    _each(args, out, lambda s, c, r, o: plans.append({"source": s, "name": c.name, **r.plan.model_dump()}))
    payload: Any = plans[0] if len(plans) == 1 else plans
    if args.output == "json":
        out.write(json.dumps(payload, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(payload, sort_keys=False))


def cmd_render(args: argparse.Namespace, out: TextIO) -> None:
    def emit(source: str, ctx: RenderContext, rendered: Any, out: TextIO) -> None:
        for obj in rendered.objects:
            out.write(f"---\n# Source: {source}\n")
            out.write(yaml.safe_dump(obj, sort_keys=False))

    _each(args, out, emit)


def cmd_crd(args: argparse.Namespace, out: TextIO) -> None:
    if args.write:
        Path(args.write).mkdir(parents=True, exist_ok=True)
        for name, text in crd_files().items():
            Path(args.write, name).write_text(text)
        return
    out.write(all_crds_yaml())


def cmd_run(args: argparse.Namespace, out: TextIO) -> None:
    import random

    import kopf

    from kvpilot.config import CONFIG

    if args.namespace:
        CONFIG.namespaces = list(args.namespace)
    CONFIG.log_format = args.log_format or CONFIG.log_format
    CONFIG.standalone = args.standalone or CONFIG.standalone
    CONFIG.verbose = args.verbose or CONFIG.verbose
    if args.resync_seconds:
        CONFIG.resync_seconds = args.resync_seconds
    if args.autoscale_seconds:
        CONFIG.autoscale_seconds = args.autoscale_seconds
    if args.peering_lifetime_seconds:
        CONFIG.peering_lifetime_seconds = args.peering_lifetime_seconds
    if CONFIG.peering_lifetime_seconds < MIN_PEERING_LIFETIME:
        # kopf refreshes an entry 5-10 s before it expires; a shorter lifetime would let live replicas lapse.
        raise SystemExit(
            f"kvpilot run: the peering lifetime must be at least {MIN_PEERING_LIFETIME} s, "
            f"not {CONFIG.peering_lifetime_seconds}"
        )
    log_format = kopf.LogFormat.JSON if CONFIG.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(verbose=CONFIG.verbose, log_format=log_format, log_prefix=True)
    import kvpilot.main  # noqa: F401  (registers the handlers; reads CONFIG at import)

    kopf.run(
        clusterwide=CONFIG.clusterwide,
        namespaces=CONFIG.namespaces,
        standalone=CONFIG.standalone,
        peering_name=CONFIG.peering_name,
        # Distinct random priorities: the highest live replica acts, the others pause.
        priority=random.SystemRandom().randint(1, 2**31 - 1),
        liveness_endpoint=f"http://{CONFIG.health_address}/healthz",
    )


def cmd_catalog(args: argparse.Namespace, out: TextIO) -> None:
    if args.what == "gpus":
        out.write(
            f"{'GPU':<16}{'vendor':<8}{'memory GiB':>11}{'TB/s':>7}{'bf16 TF':>9}{'fp8 TF':>8}  {'CC':<7}node labels\n"
        )
        for g in gpu_catalog().values():
            out.write(
                f"{g.name:<16}{g.vendor:<8}{g.memory_gib:>11.2f}{g.bandwidth_tbs:>7.2f}{g.bf16_tflops:>9.0f}"
                f"{g.fp8_tflops:>8.0f}  {g.compute_capability:<7}{', '.join(g.node_label_values)}\n"
            )
        return
    out.write(f"{'model':<44}{'params':>9}{'layers':>7}{'attn':>5}{'KV/token':>10}{'context':>9}\n")
    for m in model_catalog().values():
        arch = m.architecture
        kv = kv_layout(arch, 2, 1).bytes_per_token / 1024
        kind = "MLA" if arch.attention == "mla" else "GQA"
        params = count_parameters(arch).total / 1e9
        out.write(
            f"{m.id:<44}{params:>8.2f}B{arch.num_hidden_layers:>7}{kind:>5}{kv:>7.1f}KiB{arch.max_position_embeddings:>9}\n"
        )
        for alias, quant in m.aliases.items():
            out.write(f"  {alias} ({quant})\n")


def cmd_simulate(args: argparse.Namespace, out: TextIO) -> int:
    from kvpilot.simulate.compare import compare
    from kvpilot.simulate.engine import SimConfig
    from kvpilot.simulate.traces import compress, load_trace

    try:
        requests = compress(load_trace(Path(args.trace)), args.speedup)
    except (OSError, ValueError, KeyError) as exc:
        raise SpecError(f"cannot read trace {args.trace}: {exc}", path="") from None
    if args.limit_seconds:
        requests = [r for r in requests if r.arrival < args.limit_seconds]
    spec_data = None
    if args.file:
        _, doc = next(_documents(args.file))
        spec_data = parse_llmdeployment(doc).spec.wire()
    cfg = SimConfig(cold_start_seconds=args.cold_start, slo_queue_seconds=args.slo)
    rows, results = compare(requests, spec_data, cfg, only=None if args.compare else ["kvpilot"])
    if args.png:
        from kvpilot.simulate.plot import plot

        plot(results, Path(args.png), f"{Path(args.trace).name} ×{args.speedup:g}")
    if args.output == "json":
        out.write(json.dumps(rows, indent=2) + "\n")
    else:
        out.write(format_table(rows))
    return 0


def format_table(rows: list[dict[str, Any]]) -> str:
    head = f"{'policy':<18}{'GPU-h':>8}{'vs static':>10}{'vs oracle':>10}{'SLO ok':>9}{'p99 wait':>10}{'p90 TTFT':>10}"
    head += f"{'scale ev':>9}{'flaps':>6}\n"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['policy']:<18}{r['gpu_hours']:>8.2f}{r['vs_static_peak']:>10.2f}{r['vs_oracle']:>10.2f}"
            f"{r['slo_attainment'] * 100:>8.2f}%{r['p99_queue_wait_s']:>9.1f}s{r['p90_ttft_s']:>9.1f}s"
            f"{r['scale_events']:>9}{r['flaps']:>6}\n"
        )
    return "".join(lines)


def cmd_vllm_flags(args: argparse.Namespace, out: TextIO) -> int:
    from kvpilot.render.flags import flags_diff, flags_for
    from kvpilot.versions import VersionLine

    try:
        lines = [VersionLine.parse(v) for v in args.versions]
    except ValueError as exc:
        raise SpecError(str(exc), path="") from None
    if args.action == "list":
        out.write("\n".join(flags_for(lines[0])) + "\n")
        return 0
    if len(lines) != 2:
        raise SpecError("diff takes two versions, e.g. `kvpilot vllm-flags diff 0.10 0.33`", path="")
    diff = flags_diff(lines[0], lines[1])
    out.write(f"vLLM {lines[0]} → {lines[1]}\n")
    for key in ("added", "removed"):
        out.write(f"{key} ({len(diff[key])}):\n")
        out.writelines(f"  {name}\n" for name in diff[key])
    if diff["notes"]:
        out.write("what to do instead:\n")
        out.writelines(f"  {note}\n" for note in diff["notes"])
    return 0


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    if args.offline:
        args.output, args.namespace, args.config, args.hub = "table", None, None, False
        _each(args, out, _plan_table)
        return 0
    from kvpilot.localcluster.demo import run_demo

    source, doc = next(_documents(args.file))
    parse_llmdeployment(doc)  # refuse an invalid example before starting anything
    out.write(f"kvpilot demo: {source}\n")
    return run_demo(yaml.safe_dump(doc), out, keep=args.keep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvpilot", description="Size, render and run vLLM fleets on Kubernetes.")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_input(p: argparse.ArgumentParser) -> None:
        p.add_argument("-f", "--file", help="LLMDeployment YAML (- for stdin); default: the embedded example")
        p.add_argument("-n", "--namespace", help="namespace to render into (default: the object's, or default)")
        p.add_argument("--config", help="size from this local config.json (file or model directory)")
        p.add_argument("--hub", action="store_true", help="fetch config.json from the Hugging Face hub (HF_TOKEN)")

    plan = sub.add_parser("plan", help="print the sizing plan and how it was reached")
    with_input(plan)
    plan.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    plan.set_defaults(func=cmd_plan)
    render = sub.add_parser("render", help="print every Kubernetes object as YAML, like helm template")
    with_input(render)
    render.set_defaults(func=cmd_render)
    crd_cmd = sub.add_parser("crd", help="print the generated CustomResourceDefinitions")
    crd_cmd.add_argument("--write", metavar="DIR", help="write each CRD file into DIR instead (e.g. crds/)")
    crd_cmd.set_defaults(func=cmd_crd)
    run = sub.add_parser("run", help="run the operator (kopf) against the current kubeconfig or in-cluster")
    run.add_argument("-n", "--namespace", action="append", help="watch this namespace (repeat); default: all")
    run.add_argument("--log-format", choices=["text", "json"], help="log format (KVPILOT_LOG_FORMAT)")
    run.add_argument("--standalone", action="store_true", help="skip peering (only for a single replica)")
    run.add_argument("--resync-seconds", type=float, help="drift-repair interval (KVPILOT_RESYNC_SECONDS)")
    run.add_argument("--autoscale-seconds", type=float, help="autoscaler period (KVPILOT_AUTOSCALE_SECONDS)")
    run.add_argument(
        "--peering-lifetime-seconds",
        type=int,
        help="a standby takes over from a crashed replica within this; default 60 (KVPILOT_PEERING_LIFETIME_SECONDS)",
    )
    run.add_argument("-v", "--verbose", action="store_true")
    run.set_defaults(func=cmd_run)
    catalog = sub.add_parser("catalog", help="list the GPUs or models kvpilot knows")
    catalog.add_argument("what", choices=["gpus", "models"])
    catalog.set_defaults(func=cmd_catalog)
    simulate = sub.add_parser("simulate", help="replay a request trace against simulated vLLM replicas")
    simulate.add_argument("--trace", required=True, help="Azure LLM CSV, BurstGPT CSV or Mooncake JSONL trace")
    simulate.add_argument("-f", "--file", help="LLMDeployment whose model, GPU and autoscaling to simulate")
    simulate.add_argument("--compare", action="store_true", help="run every baseline policy beside kvpilot")
    simulate.add_argument("--speedup", type=float, default=1.0, help="replay arrivals N times faster")
    simulate.add_argument("--limit-seconds", type=float, help="only the first N seconds (after speedup)")
    simulate.add_argument("--cold-start", type=float, default=180.0, help="replica cold start, seconds")
    simulate.add_argument("--slo", type=float, default=2.0, help="queue-wait SLO per request, seconds")
    simulate.add_argument("--png", help="draw replicas vs load to this PNG (needs matplotlib)")
    simulate.add_argument("-o", "--output", choices=["table", "json"], default="table")
    simulate.set_defaults(func=cmd_simulate)
    flags = sub.add_parser("vllm-flags", help="the vLLM flags kvpilot knows per release line, or what changed")
    flags.add_argument("action", choices=["list", "diff"])
    flags.add_argument("versions", nargs="+", help="a release line (0.33) for list; two for diff")
    flags.set_defaults(func=cmd_vllm_flags)
    demo = sub.add_parser(
        "demo", help="run a local control plane with simulated GPU nodes and the operator, and apply an example"
    )
    demo.add_argument("-f", "--file", help="LLMDeployment to apply (default: the embedded example)")
    demo.add_argument("--offline", action="store_true", help="only plan the example; start nothing")
    demo.add_argument("--keep", action="store_true", help="keep the cluster running until Ctrl-C")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args, out)
    except DoesNotFitError as exc:
        err.write(f"error: {exc.issues[0]}\n")
        for i, fix in enumerate(exc.fixes, 1):
            err.write(f"  fix {i}: {fix.title} → {fix.detail}\n")
        return EXIT_DOES_NOT_FIT
    except SpecError as exc:
        for issue in exc.issues:
            err.write(f"error: {issue}\n")
        return EXIT_SPEC
    except KvpilotError as exc:
        err.write(f"error: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
