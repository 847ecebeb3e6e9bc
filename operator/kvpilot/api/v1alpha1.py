"""The LLMDeployment API (kvpilot.io/v1alpha1): the single source of truth for the CRD.

Every field carries its description (shown by ``kubectl explain``) and its default is stated in
that description rather than in the CRD, because profiles fill unset fields and a server-side
default would hide whether the user set a value.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, JsonValue, field_validator

from kvpilot.api.base import ApiModel
from kvpilot.api.rules import CelRule, cel_field
from kvpilot.catalog.architecture import ModelArchitecture
from kvpilot.catalog.gpus import gpu_names
from kvpilot.catalog.models import Quantization

GROUP = "kvpilot.io"
VERSION = "v1alpha1"
KIND = "LLMDeployment"
PLURAL = "llmdeployments"
SINGULAR = "llmdeployment"
SHORT_NAMES = ["llmd", "llmdeploy"]
API_VERSION = f"{GROUP}/{VERSION}"


def manifest(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An LLMDeployment as `kubectl apply` sends it, around a spec in its wire (camelCase) form."""
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"
Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN, max_length=32)]
K8sName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)]
# Model ids are Hugging Face repo ids or absolute paths; never a leading '-' (flag injection) or spaces.
MODEL_ID_PATTERN = r"^(/|[A-Za-z0-9])[A-Za-z0-9._/+:-]*$"

# Env vars kvpilot sets itself; a user value would silently change what kvpilot planned or leak a secret.
RESERVED_ENV = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "VLLM_API_KEY",
    "HF_HOME",
    "CUDA_VISIBLE_DEVICES",
    "VLLM_PORT",
    "VLLM_HOST_IP",
    "HOME",
)

Profile = Literal["latency", "balanced", "throughput"]
Dtype = Literal["auto", "float16", "bfloat16", "float32"]
KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"]
GgufType = Literal["Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]


class SecretKeySelector(ApiModel):
    """A key in a Secret in the LLMDeployment's namespace."""

    name: K8sName = Field(description="Name of the Secret.")
    key: str = Field(
        "token", pattern=r"^[-._a-zA-Z0-9]+$", max_length=253, description="Key in the Secret. Default: token."
    )


class ModelSpec(ApiModel):
    """The model to serve."""

    id: str = Field(
        pattern=MODEL_ID_PATTERN,
        min_length=1,
        max_length=512,
        description="Hugging Face repo id (meta-llama/Llama-3.1-8B-Instruct) or a path inside the model cache.",
    )
    revision: str | None = Field(
        None, pattern=r"^[A-Za-z0-9._/-]+$", max_length=128, description="Git revision (branch, tag or commit)."
    )
    served_name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:-]*$",
        max_length=128,
        description="Name clients pass as `model` in OpenAI requests. Default: the model id.",
    )
    quantization: Quantization = Field(
        "none",
        description="Weight quantization: none, awq, gptq, fp8, int8, bitsandbytes or gguf. A published "
        "quantized checkpoint (…-AWQ) already carries it; fp8 on an unquantized checkpoint quantizes at load.",
    )
    gguf_type: GgufType = Field("Q4_K_M", description="GGUF quantization type when quantization is gguf.")
    dtype: Dtype = Field(
        "auto", description="Activation and unquantized-weight dtype. Default auto: the checkpoint's dtype."
    )
    architecture_from: str | None = Field(
        None,
        max_length=256,
        description="Catalog model whose architecture to size with, for fine-tunes and private paths.",
    )
    architecture: ModelArchitecture | None = Field(
        None, description="Explicit architecture facts, for models in neither the catalog nor architectureFrom."
    )
    token_secret_ref: SecretKeySelector | None = Field(
        None, description="Secret holding the Hugging Face token for gated models (never a literal)."
    )
    trust_remote_code: bool = Field(False, description="Let vLLM run the model repository's own code.")

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            rule=f"!({cel_field('quantization', 'none')} in ['awq', 'gptq']) || "
            f"{cel_field('dtype', 'auto')} in ['auto', 'float16']",
            message="awq and gptq kernels compute in float16: set dtype to auto or float16",
            check=lambda m: m.quantization not in ("awq", "gptq") or m.dtype in ("auto", "float16"),
        ),
        CelRule(
            rule=f"!({cel_field('quantization', 'none')} in ['awq', 'gptq', 'bitsandbytes', 'gguf', 'int8'])"
            f" || {cel_field('dtype', 'auto')} != 'float32'",
            message="quantized weights cannot run with dtype float32",
            check=lambda m: m.quantization in ("none", "fp8") or m.dtype != "float32",
        ),
    )


class SpeculativeSpec(ApiModel):
    """Speculative decoding, rendered as vLLM's --speculative-config."""

    method: Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"] = Field(
        description="Proposer: ngram (prompt lookup), eagle/eagle3 heads, mtp (DeepSeek), or a draft model."
    )
    model: str | None = Field(
        None, pattern=MODEL_ID_PATTERN, max_length=512, description="Draft or EAGLE model (not for ngram/mtp)."
    )
    num_speculative_tokens: int = Field(3, ge=1, le=16, description="Tokens proposed per step. Default: 3.")
    prompt_lookup_max: int | None = Field(None, ge=1, le=64, description="ngram: longest n-gram matched.")

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            rule="!(self.method in ['eagle', 'eagle3', 'draft_model']) || has(self.model)",
            message="eagle, eagle3 and draft_model need speculative.model",
            check=lambda s: s.method not in ("eagle", "eagle3", "draft_model") or s.model is not None,
        ),
    )


class EnvVarSource(ApiModel):
    """Where an env var's value comes from."""

    secret_key_ref: SecretKeySelector | None = Field(None, description="A key of a Secret.")
    config_map_key_ref: SecretKeySelector | None = Field(None, description="A key of a ConfigMap.")


class EnvVar(ApiModel):
    """An environment variable for the vLLM container."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128, description="Variable name.")
    value: str | None = Field(None, max_length=4096, description="Literal value.")
    value_from: EnvVarSource | None = Field(None, description="Value from a Secret or ConfigMap key.")


EXTRA_ARG_PATTERN = r"^[^\r\n\x00]*$"


class EngineSpec(ApiModel):
    """The vLLM engine: image, version and server settings. Unset settings come from the profile."""

    image: str = Field(
        "vllm/vllm-openai:v0.33.0",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$",
        max_length=512,
        description="vLLM OpenAI server image. Default: vllm/vllm-openai:v0.33.0.",
    )
    vllm_version: str | None = Field(
        None,
        pattern=r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?([.+-][A-Za-z0-9.]+)?$",
        max_length=32,
        description="vLLM version of the image; derived from the image tag when unset (required for "
        "digest-pinned or untagged images). Decides which flags are rendered.",
    )
    max_model_len: int | None = Field(
        None, ge=16, le=10_000_000, description="Longest context (prompt + output) per request."
    )
    max_num_seqs: int | None = Field(None, ge=1, le=4096, description="Most sequences batched at once.")
    max_num_batched_tokens: int | None = Field(
        None, ge=16, le=1_048_576, description="Token budget of one engine step (prefill chunk size)."
    )
    block_size: int | None = Field(None, ge=1, le=1024, description="KV-cache block size in tokens. Default: 16.")
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0.05,
        le=0.98,
        description="Share of each GPU's memory vLLM may use. Default: the vLLM version's own (0.92 since 0.20).",
    )
    kv_cache_dtype: KvCacheDtype = Field("auto", description="KV-cache dtype; fp8 halves KV memory.")
    prefix_caching: bool | None = Field(None, description="Automatic prefix caching. Default: on.")
    chunked_prefill: bool | None = Field(None, description="Chunked prefill. Default: on.")
    enforce_eager: bool = Field(False, description="Disable CUDA graphs (less memory, slower decode).")
    speculative: SpeculativeSpec | None = Field(None, description="Speculative decoding.")
    api_key_secret_ref: SecretKeySelector | None = Field(
        None, description="Secret holding the API key clients must present (set as VLLM_API_KEY)."
    )
    port: int = Field(8000, ge=1024, le=65535, description="Port of the OpenAI-compatible server. Default: 8000.")
    run_as_user: int | None = Field(
        None,
        ge=1,
        le=2147483647,
        description="Run vLLM as this non-root UID (for images that allow it; the official image runs as root). "
        "kvpilot then sets runAsNonRoot and points HOME at a writable volume.",
    )
    extra_args: list[Annotated[str, Field(max_length=1024, pattern=EXTRA_ARG_PATTERN)]] = Field(
        default_factory=list,
        max_length=64,
        description="More vLLM flags, checked against the flag table of the vLLM version; may not set flags "
        "kvpilot owns or pass secrets.",
    )
    env: list[EnvVar] = Field(
        default_factory=list, max_length=64, description="Extra environment variables for the vLLM container."
    )

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            rule="!has(self.chunkedPrefill) || self.chunkedPrefill || !has(self.maxNumBatchedTokens) || "
            "!has(self.maxModelLen) || self.maxNumBatchedTokens >= self.maxModelLen",
            message="without chunked prefill, maxNumBatchedTokens must be at least maxModelLen",
            check=lambda e: (
                e.chunked_prefill is not False
                or e.max_num_batched_tokens is None
                or e.max_model_len is None
                or e.max_num_batched_tokens >= e.max_model_len
            ),
        ),
        CelRule(
            rule="!has(self.env) || self.env.all(e, !(e.name in [" + ", ".join(f"'{n}'" for n in RESERVED_ENV) + "]))",
            message="env may not set variables kvpilot manages: " + ", ".join(RESERVED_ENV),
            check=lambda e: all(v.name not in RESERVED_ENV for v in e.env),
            field_path=".env",
        ),
    )


class Toleration(ApiModel):
    """A Kubernetes toleration."""

    key: str | None = Field(None, max_length=317, description="Taint key.")
    operator: Literal["Exists", "Equal"] | None = Field(None, description="Exists or Equal.")
    value: str | None = Field(None, max_length=63, description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(None, description="Effect.")
    toleration_seconds: int | None = Field(None, description="For NoExecute: how long to stay bound.")


class ModelCacheSpec(ApiModel):
    """Where downloaded weights live."""

    pvc_name: K8sName | None = Field(
        None, description="A PersistentVolumeClaim to keep weights across restarts. Default: an emptyDir."
    )
    size_limit: Quantity | None = Field(
        None, description="emptyDir size limit. Default: the checkpoint size plus 20 %."
    )


GpuCount = Annotated[
    Annotated[int, Field(ge=1, le=64)] | Literal["auto"],
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": [
                {
                    "rule": "type(self) == int ? (self >= 1 && self <= 64) : self == 'auto'",
                    "message": "gpuCount is auto or a whole number from 1 to 64",
                }
            ],
        }
    ),
]


class ResourcesSpec(ApiModel):
    """GPUs and scheduling."""

    gpu_type: str = Field(
        json_schema_extra=lambda schema: schema.update(enum=list[JsonValue](gpu_names())),
        description="GPU type from the catalog (`kvpilot catalog gpus`), e.g. H100-80GB-SXM, A100-80GB, L4.",
    )
    gpu_count: GpuCount = Field(
        "auto", description="GPUs per replica: auto (the planner picks the tensor-parallel size) or N."
    )
    gpus_per_node: int = Field(8, ge=1, le=16, description="GPUs on one node; caps tensor parallelism. Default: 8.")
    resource_name: str | None = Field(
        None,
        pattern=r"^[a-z0-9.-]+/[a-z0-9.-]+$",
        max_length=253,
        description="Extended resource to request. Default: nvidia.com/gpu (amd.com/gpu for AMD).",
    )
    node_selector: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, description="Extra node labels to require."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=32, description="Tolerations, added to the GPU taint toleration."
    )
    affinity: dict[str, Any] | None = Field(
        None,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="A Kubernetes affinity; its nodeAffinity terms are combined with the GPU product rule.",
    )
    shm_size: Quantity | None = Field(
        None, description="/dev/shm size. Default: 1Gi, or 2Gi per GPU with tensor parallel."
    )
    cpu: Quantity | None = Field(None, description="CPU request per replica. Default: 4 per GPU.")
    memory: Quantity | None = Field(None, description="Memory request per replica. Default: from the checkpoint size.")
    model_cache: ModelCacheSpec = Field(default_factory=ModelCacheSpec, description="Model weights cache.")

    @field_validator("gpu_type")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value not in gpu_names():
            raise ValueError(f"unknown GPU type {value!r}; known: {', '.join(gpu_names())}")
        return value


class SizingSpec(ApiModel):
    """The workload the plan must hold in KV cache at once."""

    concurrent_sequences: int | None = Field(
        None, ge=1, le=65536, description="Sequences each replica must hold at once. Default: maxNumSeqs."
    )
    tokens_per_sequence: int | None = Field(
        None, ge=1, le=10_000_000, description="Tokens (prompt + output) per sequence. Default: maxModelLen."
    )


class MetricsSourceSpec(ApiModel):
    """Where the autoscaler reads vLLM metrics."""

    source: Literal["auto", "prometheus", "scrape"] = Field(
        "auto", description="prometheus, scrape (each ready pod's /metrics), or auto (Prometheus if a URL is set)."
    )
    prometheus_url: str | None = Field(
        None, pattern=r"^https?://[^\s]+$", max_length=512, description="Prometheus base URL."
    )


class AutoscalingSpec(ApiModel):
    """Replica autoscaling on queue wait and KV-cache usage."""

    enabled: bool = Field(False, description="Let kvpilot set replicas. Default: off (spec.replicas is used).")
    min_replicas: int = Field(1, ge=0, le=1000, description="Fewest replicas. Default: 1.")
    max_replicas: int = Field(4, ge=1, le=1000, description="Most replicas. Default: 4.")
    queue_wait_p90_seconds: float = Field(
        0.5, gt=0, le=600, description="SLO: p90 time a request waits in vLLM's queue. Default: 0.5."
    )
    kv_cache_usage_target: float = Field(
        0.8, gt=0, le=1, description="KV-cache usage (0-1) to keep replicas under. Default: 0.8."
    )
    window_seconds: int = Field(60, ge=10, le=3600, description="Metric window for decisions. Default: 60.")
    # Twice HPA's 300 s: a replica removed by mistake takes a cold start (minutes for a model server) to
    # come back, and on real traffic 5-minute dips between peaks are common (ServeGen benchmark).
    scale_down_stabilization_seconds: int = Field(
        600, ge=0, le=86400, description="How long load must stay low before removing replicas. Default: 600."
    )
    max_scale_down_step: int = Field(1, ge=1, le=100, description="Most replicas removed at once. Default: 1.")
    scale_to_zero_after_seconds: int | None = Field(
        None,
        ge=60,
        le=604800,
        description="Scale to zero after this long idle (needs minReplicas 0). Requests are not held while at "
        "zero: clients get errors until a replica is up again. Default: off.",
    )
    metrics: MetricsSourceSpec = Field(default_factory=MetricsSourceSpec, description="Metric source.")

    cel_rules: ClassVar[tuple[CelRule, ...]] = (
        CelRule(
            rule=f"{cel_field('minReplicas', 1)} <= {cel_field('maxReplicas', 4)}",
            message="minReplicas must not exceed maxReplicas",
            check=lambda a: a.min_replicas <= a.max_replicas,
        ),
        CelRule(
            rule=f"!has(self.scaleToZeroAfterSeconds) || {cel_field('minReplicas', 1)} == 0",
            message="scaleToZeroAfterSeconds needs minReplicas 0",
            check=lambda a: a.scale_to_zero_after_seconds is None or a.min_replicas == 0,
        ),
        CelRule(
            rule="!has(self.metrics) || !has(self.metrics.source) || self.metrics.source != 'prometheus' || "
            "has(self.metrics.prometheusUrl)",
            message="metrics.source prometheus needs metrics.prometheusUrl",
            check=lambda a: a.metrics.source != "prometheus" or a.metrics.prometheus_url is not None,
        ),
    )


class ObservabilitySpec(ApiModel):
    """How Prometheus finds the vLLM pods."""

    pod_monitor: bool = Field(False, description="Create a PodMonitor (Prometheus Operator). Default: off.")
    scrape_annotations: bool = Field(True, description="Add prometheus.io/* pod annotations. Default: on.")
    scrape_interval: str = Field("15s", pattern=r"^[0-9]+(s|m)$", description="PodMonitor interval. Default: 15s.")


class LLMDeploymentSpec(ApiModel):
    """Desired state of an LLMDeployment: a model served by a fleet of vLLM replicas."""

    model: ModelSpec = Field(description="The model to serve.")
    engine: EngineSpec = Field(default_factory=EngineSpec, description="The vLLM engine and its settings.")
    profile: Profile = Field(
        "balanced",
        description="Preset for batching and context: latency (8 seqs, 4k context, 512-token prefill chunks), "
        "balanced (32, 8k, 1024) or throughput (64, 2k, 2048). Engine fields override it one by one.",
    )
    resources: ResourcesSpec = Field(description="GPUs and scheduling.")
    sizing: SizingSpec = Field(default_factory=SizingSpec, description="The workload the plan must hold.")
    replicas: int = Field(1, ge=0, le=1000, description="Replicas when autoscaling is off. Default: 1.")
    autoscaling: AutoscalingSpec = Field(default_factory=AutoscalingSpec, description="Autoscaling.")
    observability: ObservabilitySpec = Field(default_factory=ObservabilitySpec, description="Metrics scraping.")


# ----------------------------------------------------------------------------------------------- status


class Condition(ApiModel):
    """A condition per the Kubernetes API conventions."""

    type: str = Field(max_length=316, description="Condition type: Ready, Progressing, Degraded, SpecValid.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(max_length=1024, description="CamelCase reason for the last transition.")
    message: str = Field("", max_length=32768, description="Human-readable detail.")
    last_transition_time: str = Field(
        json_schema_extra={"format": "date-time"}, description="When the status last changed."
    )
    observed_generation: int | None = Field(None, ge=0, description="Generation the condition was computed for.")


class PlanStatus(ApiModel):
    """The sizing plan, with its arithmetic."""

    gpu_type: str | None = Field(None, description="GPU type planned for.")
    gpus_per_replica: int | None = Field(None, description="GPUs each replica requests.")
    tensor_parallel_size: int | None = Field(None, description="vLLM tensor-parallel size.")
    weights_gib_per_gpu: float | None = Field(None, description="Weights on each GPU, GiB.")
    kv_cache_gib_per_gpu: float | None = Field(None, description="Memory left for the KV cache per GPU, GiB.")
    kv_bytes_per_token: int | None = Field(None, description="KV-cache bytes per token for the whole model.")
    kv_cache_tokens: int | None = Field(None, description="Tokens the KV cache holds per replica.")
    max_concurrency: float | None = Field(None, description="Sequences of the target length that fit at once.")
    headroom_percent: float | None = Field(None, description="KV capacity beyond the sizing demand, percent.")
    explanation: list[str] = Field(default_factory=list, description="The arithmetic, line by line.")


class MetricsStatus(ApiModel):
    """Latest observed serving metrics."""

    kv_cache_usage_percent: float | None = Field(None, description="Mean KV-cache usage across ready replicas.")
    queue_wait_p90_seconds: float | None = Field(None, description="p90 queue wait over the window.")
    requests_running: float | None = Field(None, description="Requests running across replicas.")
    requests_waiting: float | None = Field(None, description="Requests waiting across replicas.")
    observed_at: str | None = Field(None, description="When these numbers were read.")


class ScaleEvent(ApiModel):
    """One autoscaler decision that changed replicas."""

    time: str = Field(description="When.")
    from_replicas: int = Field(description="Replicas before.")
    to_replicas: int = Field(description="Replicas after.")
    reason: str = Field(max_length=1024, description="Why.")


class LLMDeploymentStatus(ApiModel):
    """Observed state of an LLMDeployment."""

    observed_generation: int | None = Field(None, description="Generation of the spec last acted on.")
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        description="Ready, Progressing, Degraded, SpecValid, MetricsAvailable.",
    )
    plan: PlanStatus | None = Field(None, description="The sizing plan.")
    vllm_version: str | None = Field(None, description="vLLM version the args were rendered for.")
    vllm_args: list[str] = Field(default_factory=list, description="The rendered vLLM command line.")
    endpoint: str | None = Field(None, description="OpenAI-compatible base URL inside the cluster.")
    served_model_name: str | None = Field(None, description="Model name for OpenAI requests.")
    replicas: int | None = Field(None, description="Replicas of the vLLM Deployment.")
    ready_replicas: int | None = Field(None, description="Ready replicas.")
    desired_replicas: int | None = Field(None, description="Replicas kvpilot wants.")
    selector: str | None = Field(None, description="Label selector of the pods (for the scale subresource).")
    metrics: MetricsStatus | None = Field(None, description="Latest serving metrics.")
    last_scale_time: str | None = Field(None, description="When replicas last changed.")
    last_scale_reason: str | None = Field(None, description="Why replicas last changed.")
    scale_history: list[ScaleEvent] = Field(default_factory=list, max_length=20, description="Recent decisions.")


class LLMDeployment(ApiModel):
    """A model served by a fleet of vLLM replicas, sized, rendered, reconciled and autoscaled by kvpilot."""

    api_version: Literal["kvpilot.io/v1alpha1"] = Field("kvpilot.io/v1alpha1", description="kvpilot.io/v1alpha1.")
    kind: Literal["LLMDeployment"] = Field("LLMDeployment", description="LLMDeployment.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Standard object metadata.")
    spec: LLMDeploymentSpec = Field(description="Desired state.")
    status: LLMDeploymentStatus | None = Field(None, description="Observed state.")
