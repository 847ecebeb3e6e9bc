"""A throwaway Kubernetes control plane for integration tests.

``ControlPlane`` runs etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok as local processes (binaries built by
``hack/envtest/build.sh``), with certificates generated on the fly, so tests
get real Deployments -> ReplicaSets -> Pods on fake (kwok) GPU nodes, real
scheduling and real garbage collection, without Docker or a kubelet.

Binaries are looked up in ``$KUBEBUILDER_ASSETS`` first, then in
``${KVPILOT_CACHE:-~/.cache/kvpilot}/envtest/<k8s-version>/``.

Environment knobs:

* ``KVPILOT_TEST_KUBECONFIG``: use that existing cluster instead; nothing is
  started and ``stop()`` does nothing.
* ``KVPILOT_CONTROLPLANE_START_TIMEOUT``: seconds allowed per component to
  become ready (default 90).
* ``KVPILOT_KEEP_CONTROLPLANE=1``: keep the temp dir (logs, certs) after stop.

Usage::

    with ControlPlane() as cp:
        cp.add_gpu_node("gpu-0")
        cp.kubectl("get", "nodes")
"""

from __future__ import annotations

import atexit
import base64
import datetime
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kvpilot.localcluster.process import end_process

# In a source checkout the build script sits beside the package; an installed wheel falls back to the pin.
REPO_ROOT = Path(__file__).resolve().parents[3]
ENVTEST_DIR = REPO_ROOT / "hack" / "envtest"
BUILD_COMMAND = "hack/envtest/build.sh"
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
DEFAULT_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "namespace-controller",
)
REQUIRED_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")
_FALLBACK_K8S_VERSION = "v1.36.3"

T = TypeVar("T")


class ControlPlaneError(RuntimeError):
    """A component failed to start or a wait timed out."""


class BinariesNotFound(ControlPlaneError):
    """The control-plane binaries have not been built."""


def k8s_version() -> str:
    """The Kubernetes version that hack/envtest builds (from its go.mod)."""
    try:
        text = (ENVTEST_DIR / "go.mod").read_text()
    except OSError:
        return _FALLBACK_K8S_VERSION
    m = re.search(r"^\s*k8s\.io/kubernetes\s+(v1\.\S+)", text, re.MULTILINE)
    return m.group(1) if m else _FALLBACK_K8S_VERSION


def cache_dir(version: str | None = None) -> Path:
    """Where hack/envtest/build.sh puts the binaries."""
    root = os.environ.get("KVPILOT_CACHE")
    if root:
        base = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "kvpilot"
    return base / "envtest" / (version or k8s_version())


def find_binaries() -> dict[str, Path]:
    """Map each required binary to its path, or raise BinariesNotFound."""
    search: list[Path] = []
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        search.append(Path(assets))
    search.append(cache_dir())
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in REQUIRED_BINARIES:
        for d in search:
            if os.access(d / name, os.X_OK):
                found[name] = d / name
                break
        else:
            missing.append(name)
    if missing:
        raise BinariesNotFound(
            f"control-plane binaries not found: {', '.join(missing)} (looked in "
            f"{', '.join(str(d) for d in search)}); build them with `{BUILD_COMMAND}` "
            "(tens of minutes cold, cached afterwards)"
        )
    return found


def binaries_available() -> bool:
    try:
        find_binaries()
    except BinariesNotFound:
        return False
    return True


def wait_for(
    fn: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.25,
    what: str = "condition",
) -> T:
    """Call ``fn`` until it returns something truthy; return that value."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = fn()
            if value:
                return value
        except Exception as exc:  # keep polling; report the last error on timeout
            last_exc = exc
        if time.monotonic() >= deadline:
            suffix = f" (last error: {last_exc!r})" if last_exc else ""
            raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what}{suffix}")
        time.sleep(interval)


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class _Pki:
    ca_cert: bytes
    serving_cert: bytes
    serving_key: bytes
    admin_cert: bytes
    admin_key: bytes
    sa_public: bytes
    sa_private: bytes


def _make_pki(hosts: Sequence[str]) -> _Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(minutes=5)
    not_after = now + datetime.timedelta(days=7)

    def key_pem(key: Any) -> bytes:
        pem: bytes = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return pem

    def name(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(attrs)

    def usage(is_ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=True,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=is_ca,
            crl_sign=is_ca,
            encipher_only=False,
            decipher_only=False,
        )

    def builder(subject: x509.Name, issuer: x509.Name, public_key: Any, is_ca: bool) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
            .add_extension(usage(is_ca), critical=True)
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("kvpilot-envtest-ca")
    ca = (
        builder(ca_name, ca_name, ca_key.public_key(), is_ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        subject: x509.Name, purpose: x509.ObjectIdentifier, sans: list[x509.GeneralName] | None = None
    ) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert_builder = (
            builder(subject, ca_name, key.public_key(), is_ca=False)
            .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if sans:
            cert_builder = cert_builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = cert_builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), key_pem(key)

    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    serving_cert, serving_key = leaf(name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)
    admin_cert, admin_key = leaf(name("admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _Pki(
        ca_cert=ca.public_bytes(serialization.Encoding.PEM),
        serving_cert=serving_cert,
        serving_key=serving_key,
        admin_cert=admin_cert,
        admin_key=admin_key,
        sa_public=sa_public,
        sa_private=key_pem(sa_key),
    )


# --------------------------------------------------------------------------- kwok stages

# Written for kwok v0.8 (kwok.x-k8s.io/v1alpha1 Stage). Templates render a
# status patch; fields they leave out (e.g. node capacity) are kept.
KWOK_STAGES = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      conditions:
      {{ range NodeConditions }}
      - type: {{ .type | Quote }}
        status: {{ .status | Quote }}
        reason: {{ .reason | Quote }}
        message: {{ .message | Quote }}
        lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      {{ if not .status.addresses }}
      addresses:
      - type: InternalIP
        address: {{ NodeIP | Quote }}
      - type: Hostname
        address: {{ .metadata.name | Quote }}
      {{ end }}
      {{ if not .status.allocatable }}
      allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
      capacity: {cpu: "32", memory: 256Gi, pods: "110"}
      {{ end }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
        kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
        containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
        kernelVersion: {{ printf "kwok-%s" Version | Quote }}
        osImage: kwok
        machineID: ""
        systemUUID: ""
        bootID: ""
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat-with-lease
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ["True"]
  delay:
    durationMilliseconds: 600000
    jitterDurationMilliseconds: 610000
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $since := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - type: {{ .type | Quote }}
        status: {{ .status | Quote }}
        reason: {{ .reason | Quote }}
        message: {{ .message | Quote }}
        lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $since | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Pending]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      startTime: {{ $now | Quote }}
      conditions:
      {{ range list "Initialized" "ContainersReady" "Ready" }}
      - type: {{ . }}
        status: "True"
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      {{ range $.spec.readinessGates }}
      - type: {{ .conditionType | Quote }}
        status: "True"
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      {{ with .spec.initContainers }}
      initContainerStatuses:
      {{ range . }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        restartCount: 0
        {{ if eq (or .restartPolicy "") "Always" }}
        started: true
        state: {running: {startedAt: {{ $now | Quote }}}}
        {{ else }}
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}
      {{ end }}
      {{ with NodeIPWith .spec.nodeName }}
      hostIP: {{ . | Quote }}
      hostIPs: [{ip: {{ . | Quote }}}]
      {{ end }}
      {{ $meta := .metadata }}
      {{ $hostNet := or .spec.hostNetwork false }}
      {{ $uid := or $meta.uid "" }}
      {{ with PodIPWith .spec.nodeName $hostNet $uid (or $meta.name "") (or $meta.namespace "") }}
      podIP: {{ . | Quote }}
      podIPs: [{ip: {{ . | Quote }}}]
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: .metadata.ownerReferences.[].kind
      operator: In
      values: [Job]
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Succeeded
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: Exists
  next:
    delete: true
"""


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 40) -> str:
    try:
        data = path.read_bytes()[-16384:]
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class _Component:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None


# --------------------------------------------------------------------------- ControlPlane


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok."""

    def __init__(
        self,
        *,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        start_timeout: float | None = None,
    ) -> None:
        self.controllers = tuple(controllers)
        env_timeout = os.environ.get("KVPILOT_CONTROLPLANE_START_TIMEOUT", "90")
        self.start_timeout = start_timeout or float(env_timeout)
        self.external_kubeconfig = os.environ.get("KVPILOT_TEST_KUBECONFIG") or None
        self.tmpdir: Path | None = None
        self.start_seconds: float | None = None
        self._binaries: dict[str, Path] = {}
        self._components: list[_Component] = []
        self._kubeconfig: Path | None = None
        self._server: str | None = None
        self._ssl: ssl.SSLContext | None = None
        self._started = False

    # -- public API -------------------------------------------------------------------

    @property
    def external(self) -> bool:
        """True when running against KVPILOT_TEST_KUBECONFIG instead of local processes."""
        return self.external_kubeconfig is not None

    @property
    def expected_version(self) -> str | None:
        """gitVersion the server should report, when it is one we built."""
        if self.external:
            return None
        try:
            apiserver = self._binaries.get("kube-apiserver") or find_binaries()["kube-apiserver"]
        except BinariesNotFound:
            return None
        return k8s_version() if apiserver.parent == cache_dir() else None

    @property
    def kubeconfig(self) -> Path:
        if self._kubeconfig is None:
            raise ControlPlaneError("control plane not started")
        return self._kubeconfig

    @property
    def server(self) -> str:
        if self._server is None:
            raise ControlPlaneError("control plane not started")
        return self._server

    def start(self) -> ControlPlane:
        if self._started:
            return self
        t0 = time.monotonic()
        if self.external_kubeconfig:
            self._kubeconfig = Path(self.external_kubeconfig)
            self._server = self._server_from_kubeconfig(self._kubeconfig)
            self._started = True
            self.start_seconds = time.monotonic() - t0
            return self

        self._binaries = find_binaries()
        for attempt in range(1, 4):
            self.tmpdir = Path(tempfile.mkdtemp(prefix="kvpilot-controlplane-"))
            atexit.register(self.stop)
            self._started = True
            try:
                self._start_all()
            except ControlPlaneError as exc:
                self.stop()
                # Ports are picked free but bound later by the child: another process may
                # take one in between. Only that race is worth a retry.
                if attempt == 3 or "address already in use" not in str(exc):
                    raise
            except BaseException:
                self.stop()
                raise
            else:
                break
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Terminate every process (newest first) and remove the temp dir. Idempotent."""
        atexit.unregister(self.stop)
        # Clients first (all at once), then kube-apiserver, then etcd: an apiserver
        # whose etcd is gone spends its whole shutdown retrying etcd.
        servers = {"kube-apiserver": 1, "etcd": 2}
        for tier in (0, 1, 2):
            batch = [c for c in self._components if servers.get(c.name, 0) == tier]
            for comp in batch:
                if comp.proc.poll() is None:
                    comp.proc.terminate()
            for comp in batch:
                try:
                    comp.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    comp.proc.kill()
                    comp.proc.wait()
        self._components.clear()
        if self.tmpdir is not None and os.environ.get("KVPILOT_KEEP_CONTROLPLANE") != "1":
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        self.tmpdir = None
        self._started = False

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = False, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; check=True raises ControlPlaneError on failure."""
        binary = self._binaries.get("kubectl") or self._find_kubectl()
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        if self.tmpdir is not None:
            env["KUBECACHEDIR"] = str(self.tmpdir / "kubectl-cache")
        result = subprocess.run(
            [str(binary), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient for this cluster (caller closes it)."""
        from kubernetes import config

        new_client: Any = config.new_client_from_config  # untyped upstream
        return new_client(config_file=str(self.kubeconfig))

    def add_gpu_node(
        self,
        name: str,
        gpu_count: int = 8,
        gpu_product: str = "NVIDIA-H100-80GB-HBM3",
        resource_name: str = "nvidia.com/gpu",
        *,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create a kwok-managed Node that advertises ``gpu_count`` GPUs."""
        from kubernetes import client

        resources = {"cpu": "64", "memory": "512Gi", "pods": "110", resource_name: str(gpu_count)}
        node_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            "nvidia.com/gpu.product": gpu_product,
            "nvidia.com/gpu.count": str(gpu_count),
            **(labels or {}),
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]},
                "labels": node_labels,
            },
            "status": {"capacity": dict(resources), "allocatable": dict(resources)},
        }
        with self.api_client() as api:
            core: Any = client.CoreV1Api(api)
            created = core.create_node(body)
            result: dict[str, Any] = api.sanitize_for_serialization(created)
        return result

    def condition_is_true(self, resource: str, condition: str, namespace: str | None = None) -> bool:
        """Whether ``resource`` (kubectl's "kind/name") exists and has ``condition`` with status True."""
        scope = ["-n", namespace] if namespace else []
        result = self.kubectl("get", resource, *scope, "-o", "json")
        if result.returncode != 0:
            return False
        conditions = (json.loads(result.stdout).get("status") or {}).get("conditions") or []
        return any(c.get("type") == condition and c.get("status") == "True" for c in conditions)

    def wait_for_condition(
        self, resource: str, condition: str, namespace: str | None = None, timeout: float = 60
    ) -> bool:
        """Poll until ``resource`` has ``condition``=True; False when ``timeout`` passes first.

        Not `kubectl wait --for=condition=…`: it fails at once, instead of waiting, on an object
        whose status has no conditions yet, which is how a just-created CRD or LLMDeployment looks.
        """
        try:
            wait_for(lambda: self.condition_is_true(resource, condition, namespace), timeout=timeout)
        except ControlPlaneError:
            return False
        return True

    def peering_entries(self, name: str = "kvpilot") -> dict[str, dict[str, Any]]:
        """The entries of kopf's ClusterKopfPeering ``name`` by identity, withdrawn ones left out ({} if absent)."""
        result = self.kubectl("get", "clusterkopfpeering", name, "-o", "json")
        if result.returncode != 0:
            return {}
        status = json.loads(result.stdout).get("status") or {}
        return {identity: entry for identity, entry in status.items() if entry}

    def install_crds(self, timeout: float = 60) -> None:
        """Apply kvpilot's generated CRDs and wait until the API server serves every one of them."""
        from kvpilot.api.crd import all_crds_yaml

        manifests = all_crds_yaml()
        self.kubectl("apply", "--server-side", "-f", "-", input=manifests, check=True)
        for name in [doc["metadata"]["name"] for doc in yaml.safe_load_all(manifests) if doc]:
            if not self.wait_for_condition(f"crd/{name}", "Established", timeout=timeout):
                raise ControlPlaneError(f"CRD {name} not Established after {timeout:.0f}s")

    def wait_node_ready(self, name: str, timeout: float = 60) -> dict[str, Any]:
        from kubernetes import client

        with self.api_client() as api:
            core: Any = client.CoreV1Api(api)

            def ready() -> Any:
                node = core.read_node(name)
                conds = node.status.conditions or []
                return node if any(c.type == "Ready" and c.status == "True" for c in conds) else None

            node = wait_for(ready, timeout=timeout, what=f"node {name} Ready")
            result: dict[str, Any] = api.sanitize_for_serialization(node)
        return result

    def get(self, path: str, timeout: float = 10) -> Any:
        """GET an API path (e.g. "/version") as the admin user; returns decoded JSON."""
        if self.external:
            return json.loads(self.kubectl("get", "--raw", path, check=True).stdout)
        req = urllib.request.Request(self.server + path, headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout, context=self._ssl) as resp:
            return json.loads(resp.read())

    def log_path(self, component: str) -> Path:
        for comp in self._components:
            if comp.name == component:
                return comp.log
        raise KeyError(component)

    # -- internals --------------------------------------------------------------------

    def _find_kubectl(self) -> Path:
        try:
            return find_binaries()["kubectl"]
        except BinariesNotFound:
            found = shutil.which("kubectl")
            if not found:
                raise
            return Path(found)

    @staticmethod
    def _server_from_kubeconfig(path: Path) -> str:
        import yaml

        cfg = yaml.safe_load(path.read_text())
        ctx_name = cfg.get("current-context")
        ctx = next((c["context"] for c in cfg.get("contexts", []) if c["name"] == ctx_name), None)
        cluster_name = ctx["cluster"] if ctx else cfg["clusters"][0]["name"]
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == cluster_name)
        server: str = cluster["server"]
        return server

    def _spawn(self, name: str, args: Sequence[str], env: dict[str, str] | None = None) -> _Component:
        assert self.tmpdir is not None
        log = self.tmpdir / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("ab") as fh:
            fh.write(f"$ {' '.join(args)}\n".encode())
            fh.flush()
            proc = subprocess.Popen(
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=self.tmpdir,
                env=env,
                start_new_session=True,
            )
        comp = _Component(name, proc, log, tuple(args), env)
        self._components.append(comp)
        return comp

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stop kube-apiserver, keep it down ``down_seconds``, start it again with the same flags and
        wait until it is ready: what a control-plane upgrade or crash looks like to clients."""
        if self.external:
            raise ControlPlaneError("cannot restart the API server of an external cluster")
        comp = next(c for c in self._components if c.name == "kube-apiserver")
        end_process(comp.proc)
        self._components.remove(comp)
        time.sleep(down_seconds)
        fresh = self._spawn("kube-apiserver", comp.args, comp.env)
        server, ctx = self.server, self._ssl
        self._wait_ready(fresh, lambda: self._http_ok(f"{server}/readyz", ctx), "GET /readyz after restart")

    def _wait_ready(self, comp: _Component, probe: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while True:
            rc = comp.proc.poll()
            if rc is not None:
                raise ControlPlaneError(f"{comp.name} exited with code {rc} before {what}; {self._log_hint(comp)}")
            try:
                if probe():
                    return
            except (OSError, ValueError, urllib.error.URLError) as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"{comp.name} not ready ({what}) after {self.start_timeout:.0f}s"
                    f" (last error: {last!r}); {self._log_hint(comp)}"
                )
            time.sleep(0.1)

    @staticmethod
    def _log_hint(comp: _Component) -> str:
        return f"end of {comp.log} (removed on stop unless KVPILOT_KEEP_CONTROLPLANE=1):\n{_tail(comp.log)}"

    @staticmethod
    def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError as exc:
            exc.close()
            return False

    def _start_all(self) -> None:
        assert self.tmpdir is not None
        tmp = self.tmpdir
        pki_dir = tmp / "pki"
        pki_dir.mkdir()
        pki = _make_pki(["127.0.0.1", "localhost"])
        files = {
            "ca.crt": pki.ca_cert,
            "apiserver.crt": pki.serving_cert,
            "apiserver.key": pki.serving_key,
            "admin.crt": pki.admin_cert,
            "admin.key": pki.admin_key,
            "sa.pub": pki.sa_public,
            "sa.key": pki.sa_private,
        }
        for fname, data in files.items():
            (pki_dir / fname).write_bytes(data)
            (pki_dir / fname).chmod(0o600)

        ports = {n: _free_port() for n in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")}
        bins = self._binaries

        # etcd
        etcd_url = f"http://127.0.0.1:{ports['etcd']}"
        peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
        etcd = self._spawn(
            "etcd",
            [
                str(bins["etcd"]),
                "--name=kvpilot",
                f"--data-dir={tmp / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=kvpilot={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait_ready(etcd, lambda: self._http_ok(f"{etcd_url}/health"), "GET /health")

        # kube-apiserver
        server = f"https://127.0.0.1:{ports['apiserver']}"
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(bins["kube-apiserver"]),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--secure-port={ports['apiserver']}",
                f"--cert-dir={tmp / 'apiserver-certs'}",
                f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
                f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
                f"--client-ca-file={pki_dir / 'ca.crt'}",
                "--authorization-mode=Node,RBAC",
                "--service-cluster-ip-range=10.0.0.0/16",  # room for thousands of Services (scale tests)
                "--allow-privileged=true",
                # ServiceAccount: no token controller runs. TaintNodesByCondition: its
                # not-ready taint is normally lifted by node-lifecycle-controller, which
                # is not run; kwok's Ready condition is what counts here.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                f"--service-account-issuer={server}",
                f"--service-account-key-file={pki_dir / 'sa.pub'}",
                f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
                "--profiling=false",
            ],
        )
        ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        ctx.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        self._ssl = ctx
        self._server = server
        self._wait_ready(apiserver, lambda: self._http_ok(f"{server}/readyz", ctx), "GET /readyz")
        self._wait_ready(
            apiserver,
            lambda: self._http_ok(f"{server}/api/v1/namespaces/default", ctx),
            "namespace default exists",
        )

        # admin kubeconfig (self-contained: certificates embedded)
        kubeconfig = tmp / "admin.kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "kvpilot-envtest",
                            "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)},
                        }
                    ],
                    "users": [
                        {
                            "name": "admin",
                            "user": {
                                "client-certificate-data": _b64(pki.admin_cert),
                                "client-key-data": _b64(pki.admin_key),
                            },
                        }
                    ],
                    "contexts": [
                        {
                            "name": "kvpilot-envtest",
                            "context": {"cluster": "kvpilot-envtest", "user": "admin"},
                        }
                    ],
                    "current-context": "kvpilot-envtest",
                },
                indent=2,
            )
        )
        kubeconfig.chmod(0o600)
        self._kubeconfig = kubeconfig

        # kube-controller-manager, kube-scheduler and kwok start in parallel.
        kcm = self._spawn(
            "kube-controller-manager",
            [
                str(bins["kube-controller-manager"]),
                f"--kubeconfig={kubeconfig}",
                f"--controllers={','.join(self.controllers)}",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['kcm']}",
                f"--cert-dir={tmp / 'kcm-certs'}",
                "--kube-api-qps=1000",
                "--kube-api-burst=2000",
                "--profiling=false",
            ],
        )
        scheduler = self._spawn(
            "kube-scheduler",
            [
                str(bins["kube-scheduler"]),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['scheduler']}",
                f"--cert-dir={tmp / 'scheduler-certs'}",
                "--profiling=false",
            ],
        )
        stages = tmp / "kwok-stages.yaml"
        stages.write_text(KWOK_STAGES.lstrip())
        kwok_home = tmp / "kwok-home"  # keeps a user's ~/.kwok/kwok.yaml out of the test cluster
        kwok_home.mkdir()
        kwok = self._spawn(
            "kwok",
            [
                str(bins["kwok"]),
                f"--kubeconfig={kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION[0]}={KWOK_NODE_ANNOTATION[1]}",
                # Pod IPs on loopback: tests serve vLLM metrics there, and nothing leaves this machine.
                "--cidr=127.1.0.0/16",
                "--node-ip=127.1.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{ports['kwok']}",
            ],
            env=dict(os.environ, HOME=str(kwok_home)),
        )
        # Their self-signed serving certs are not worth verifying: loopback health probes only.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait_ready(kcm, lambda: self._http_ok(f"https://127.0.0.1:{ports['kcm']}/healthz", insecure), "/healthz")
        self._wait_ready(
            scheduler,
            lambda: self._http_ok(f"https://127.0.0.1:{ports['scheduler']}/healthz", insecure),
            "/healthz",
        )
        self._wait_ready(kwok, lambda: self._http_ok(f"http://127.0.0.1:{ports['kwok']}/healthz"), "/healthz")


__all__ = [
    "BUILD_COMMAND",
    "BinariesNotFound",
    "ControlPlane",
    "ControlPlaneError",
    "binaries_available",
    "cache_dir",
    "find_binaries",
    "k8s_version",
    "wait_for",
]
