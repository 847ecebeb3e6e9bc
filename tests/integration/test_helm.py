"""The Helm chart with the real Helm CLI (built from helm.sh/helm/v3) against the real API server.

lint, template for every documented values combination, the schema refusing bad values, install,
a server-side dry run of the operator pod in a namespace enforcing Pod Security "restricted", the
operator running with nothing but the chart's RBAC, upgrade keeping LLMDeployments, and uninstall
leaving the CRDs and their objects in place.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess
from tests.integration.helpers import ROOT, eventually

CHART = ROOT / "charts" / "kvpilot"
HELM_VERSION = "v3.22.0"
RELEASE, RELEASE_NS = "kvpilot", "kvpilot-system"

# Every verb the operator uses, and nothing more (an RBAC audit: the chart must grant exactly these).
# Server-side apply is a PATCH, but one that creates the object needs "create" as well.
OPERATOR_VERBS = {
    ("kvpilot.io", "llmdeployments"): {"get", "list", "watch", "patch"},
    ("kvpilot.io", "llmdeployments/status"): {"get", "patch"},
    ("apps", "deployments"): {"get", "list", "watch", "create", "patch"},
    ("", "services"): {"get", "list", "watch", "create", "patch"},
    ("", "pods"): {"list"},
    ("", "events"): {"create"},
    ("monitoring.coreos.com", "podmonitors"): {"get", "list", "create", "patch", "delete"},
}
CLUSTER_ONLY_VERBS = {
    ("kopf.dev", "clusterkopfpeerings"): {"get", "list", "watch", "patch", "create"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
}


def helm_binary() -> Path | None:
    if os.environ.get("KVPILOT_HELM"):
        return Path(os.environ["KVPILOT_HELM"])
    cached = Path.home() / ".cache" / "kvpilot" / "helm" / HELM_VERSION / "helm"
    return cached if cached.exists() else None


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    binary = helm_binary()
    if binary is None:
        pytest.skip("helm is not built: run `bash hack/helm/build.sh` (hack/test.sh does)")
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(
        os.environ,
        HELM_CACHE_HOME=str(home / "cache"),
        HELM_CONFIG_HOME=str(home / "config"),
        HELM_DATA_HOME=str(home / "data"),
    )

    def run(*args: str, kubeconfig: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        extra = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
        result = subprocess.run(
            [str(binary), *args, *extra], capture_output=True, text=True, env=env, timeout=180, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return result

    yield run


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_helm_is_the_built_version(helm: Any) -> None:
    assert HELM_VERSION in helm("version", "--short").stdout


def test_lint_strict(helm: Any) -> None:
    out = helm("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out.stdout


VALUE_SETS: dict[str, list[str]] = {
    "defaults": [],
    "namespaced": ["--set", "watchNamespaces={team-a,team-b}"],
    "observability": [
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.namespace=monitoring",
    ],
    "ha-text-logs": [
        "--set",
        "replicaCount=2",
        "--set",
        "operator.logFormat=text",
        "--set",
        "operator.peeringLifetimeSeconds=20",
    ],
    "existing-serviceaccount": ["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops"],
    "no-rbac-no-metrics": ["--set", "rbac.create=false", "--set", "metrics.service=false"],
}


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_template_renders_every_documented_combination(helm: Any, name: str) -> None:
    objects = docs(helm("template", RELEASE, str(CHART), "-n", RELEASE_NS, *VALUE_SETS[name]).stdout)
    kinds = [o["kind"] for o in objects]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"]["drop"] == ["ALL"] and security["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["resources"]["limits"] and container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e.get("value") for e in container["env"]}
    # kopf's peering identity is the pod's name, so a crashed container's successor takes its entry over.
    pod_id = next(e for e in container["env"] if e["name"] == "POD_ID")
    assert pod_id["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["KVPILOT_PEERING_LIFETIME_SECONDS"] == ("20" if name == "ha-text-logs" else "60")
    if name == "namespaced":
        assert env["KVPILOT_NAMESPACES"] == "team-a,team-b"
        roles = [o for o in objects if o["kind"] == "Role"]
        assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
        cluster_rules = [r for o in objects if o["kind"] == "ClusterRole" for r in o["rules"]]
        assert {(g, res) for r in cluster_rules for g in r["apiGroups"] for res in r["resources"]} == {
            ("apiextensions.k8s.io", "customresourcedefinitions")
        }
    if name == "observability":
        rule = next(o for o in objects if o["kind"] == "PrometheusRule")
        alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
        assert alerts["KvpilotKVCacheNearlyFull"]["for"] == "5m" and len(alerts) == 5
        dashboard = next(o for o in objects if o["kind"] == "ConfigMap")
        assert dashboard["metadata"]["namespace"] == "monitoring"
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(dashboard["data"]["kvpilot-fleets.json"])["uid"] == "kvpilot-fleets"
        assert "ServiceMonitor" in kinds
    if name == "existing-serviceaccount":
        assert "ServiceAccount" not in kinds
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
    if name == "no-rbac-no-metrics":
        assert not {"ClusterRole", "ClusterRoleBinding", "Role", "Service"} & set(kinds)
    if name == "ha-text-logs":
        assert deployment["spec"]["replicas"] == 2 and env["KVPILOT_LOG_FORMAT"] == "text"


def test_granted_verbs_are_exactly_the_ones_the_operator_uses(helm: Any) -> None:
    objects = docs(helm("template", RELEASE, str(CHART), "-n", RELEASE_NS).stdout)
    granted: dict[tuple[str, str], set[str]] = {}
    for role in (o for o in objects if o["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == {**OPERATOR_VERBS, **CLUSTER_ONLY_VERBS}
    assert ("", "secrets") not in granted and not any("*" in v for v in granted.values())


BAD_VALUES = [
    (["--set", "replicaCount=-1"], "replicaCount"),
    (["--set", "operator.logFormat=xml"], "logFormat"),
    (["--set", "watchNamespaces={Bad_Namespace}"], "watchNamespaces"),
    (["--set", "prometheusRule.kvCacheHighFor=five minutes"], "kvCacheHighFor"),
    (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
    (["--set", "metricsPort=70000"], "metricsPort"),
    (["--set", "resouces.limits.cpu=1"], "resouces"),  # a typo is an error, not a silently ignored key
    (["--set", "operator.resyncSeconds=1"], "resyncSeconds"),
    (["--set", "operator.peeringLifetimeSeconds=5"], "peeringLifetimeSeconds"),
]


@pytest.mark.parametrize(("args", "field"), BAD_VALUES, ids=[f for _, f in BAD_VALUES])
def test_schema_rejects_bad_values(helm: Any, args: list[str], field: str) -> None:
    result = helm("template", RELEASE, str(CHART), *args, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr


def _service_account_kubeconfig(plane: ControlPlane, namespace: str, account: str, path: Path) -> Path:
    token = plane.kubectl("create", "token", account, "-n", namespace, "--duration=1h", check=True).stdout.strip()
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": account}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    return path


LLMD = """
apiVersion: kvpilot.io/v1alpha1
kind: LLMDeployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  model: {{id: meta-llama/Llama-3.1-8B-Instruct}}
  resources: {{gpuType: L4}}
  observability: {{podMonitor: false}}
"""


def test_install_run_with_chart_rbac_upgrade_and_uninstall(
    helm: Any, control_plane: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> None:
    plane = control_plane
    operator.stop()  # the admin-credentialed test operator would do the work the chart's RBAC must allow
    try:
        _install_run_upgrade_uninstall(helm, plane, tmp_path)
    finally:
        operator.start()


def _install_run_upgrade_uninstall(helm: Any, plane: ControlPlane, tmp_path: Path) -> None:
    helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        RELEASE_NS,
        "--create-namespace",
        "--wait=false",
        kubeconfig=plane.kubeconfig,
    )
    try:
        status = helm("status", RELEASE, "-n", RELEASE_NS, "-o", "json", kubeconfig=plane.kubeconfig).stdout
        assert json.loads(status)["info"]["status"] == "deployed"

        # The operator pod as the chart renders it passes Pod Security "restricted".
        plane.kubectl("create", "namespace", "restricted-check", check=True)
        plane.kubectl(
            "label", "namespace", "restricted-check", "pod-security.kubernetes.io/enforce=restricted", check=True
        )
        template = json.loads(
            plane.kubectl("get", "deployment", RELEASE, "-n", RELEASE_NS, "-o", "json", check=True).stdout
        )["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kvpilot-operator-check", "namespace": "restricted-check"},
            "spec": {**template["spec"], "serviceAccountName": "default"},
        }
        dry = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(pod))
        assert dry.returncode == 0, dry.stderr
        assert "violate" not in dry.stderr  # PodSecurity warns on violations even in dry runs

        # The operator, running with nothing but the chart's ServiceAccount token, does its whole job.
        plane.kubectl("create", "namespace", "helm-team", check=True)
        kubeconfig = _service_account_kubeconfig(plane, RELEASE_NS, RELEASE, tmp_path / "sa.kubeconfig")
        # Its own peering object (created through the chart's RBAC too), so no other operator pauses it.
        # Only this process gets it: the session's operator, restarted afterwards, keeps its own.
        chart_operator = OperatorProcess(kubeconfig, tmp_path, extra_env={"KVPILOT_PEERING_NAME": "kvpilot-chart-rbac"})
        chart_operator.start()
        try:
            plane.kubectl(
                "apply", "-f", "-", input=LLMD.format(name="via-chart-rbac", namespace="helm-team"), check=True
            )

            def ready() -> Any:
                out = plane.kubectl("get", "llmd", "via-chart-rbac", "-n", "helm-team", "-o", "json", check=True).stdout
                conditions = json.loads(out).get("status", {}).get("conditions", [])
                return any(c["type"] == "SpecValid" and c["status"] == "True" for c in conditions)

            eventually(ready, timeout=60, what="the LLMDeployment reconciled by the chart-RBAC operator")
            child = plane.kubectl("get", "deployment", "via-chart-rbac", "-n", "helm-team")
            status = plane.kubectl("get", "llmd", "via-chart-rbac", "-n", "helm-team", "-o", "yaml").stdout
            assert child.returncode == 0, status  # an RBAC gap shows up as Degraded/ApplyFailed with the 403
            log = chart_operator.log_text()
            assert "helm-team/via-chart-rbac" in log, log[-3000:]  # this operator did the work
            # An RBAC denial names the ServiceAccount; other 403s (e.g. a namespace another test is deleting,
            # which this cluster-wide operator also watches) are not about the chart's RBAC.
            denials = [
                line for line in log.splitlines() if "forbidden" in line.lower() and "system:serviceaccount:" in line
            ]
            assert not denials, "\n".join(denials[:5])
        finally:
            chart_operator.stop()

        # Upgrade keeps existing LLMDeployments and applies the new values.
        helm(
            "upgrade",
            RELEASE,
            str(CHART),
            "-n",
            RELEASE_NS,
            "--set",
            "replicaCount=2",
            "--wait=false",
            kubeconfig=plane.kubeconfig,
        )
        replicas = plane.kubectl("get", "deployment", RELEASE, "-n", RELEASE_NS, "-o", "jsonpath={.spec.replicas}")
        assert replicas.stdout == "2"
        assert plane.kubectl("get", "llmd", "via-chart-rbac", "-n", "helm-team").returncode == 0
    finally:
        helm("uninstall", RELEASE, "-n", RELEASE_NS, "--wait", kubeconfig=plane.kubeconfig, check=False)

    # Uninstall removes the operator but leaves the CRDs and every LLMDeployment.
    eventually(
        lambda: plane.kubectl("get", "deployment", RELEASE, "-n", RELEASE_NS).returncode != 0,
        timeout=30,
        what="the operator Deployment removed",
    )
    assert plane.kubectl("get", "crd", "llmdeployments.kvpilot.io").returncode == 0
    assert plane.kubectl("get", "llmd", "via-chart-rbac", "-n", "helm-team").returncode == 0
    plane.kubectl("delete", "llmd", "via-chart-rbac", "-n", "helm-team", "--wait=false")
