"""The only module that talks to the Kubernetes API (besides kopf itself).

It maps API trouble onto kvpilot's error hierarchy: conflicts, throttling, 5xx and connection errors
are ``TransientError`` (retry with backoff); a request the API server rejects as invalid is an
``ApplyRejected`` that the status reports instead of retrying in a loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from kvpilot import telemetry
from kvpilot.api.v1alpha1 import API_VERSION, KIND
from kvpilot.errors import KvpilotError, TransientError

FIELD_MANAGER = "kvpilot"
log = logging.getLogger("kvpilot.kube")

Obj = dict[str, Any]


class ApplyRejected(KvpilotError):
    """The API server refused an object kvpilot rendered (admission, quota, validation)."""


class KindNotServed(KvpilotError):
    """The cluster does not serve this kind (e.g. PodMonitor without the Prometheus Operator)."""


def _translate(exc: Exception, what: str) -> Exception:
    if isinstance(exc, ApiException):
        status = exc.status or 0
        telemetry.API_ERRORS.labels(str(status) if status else "no_response").inc()
        body = exc.body.decode() if isinstance(exc.body, bytes) else str(exc.body or exc.reason)
        if status in (409, 429) or status >= 500 or status == 0:
            detail = _status_message(body)
            return TransientError(
                f"{what}: API server answered {status} {exc.reason}" + (f": {detail}" if detail else ""),
                delay=5,
                cause=exc,
            )
        return ApplyRejected(f"{what}: {status} {body[:500]}")
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        telemetry.API_ERRORS.labels("unreachable").inc()
        return TransientError(f"{what}: cannot reach the API server ({exc})", delay=5, cause=exc)
    return exc


def _status_message(body: str) -> str:
    """The message of a Kubernetes Status body, e.g. why a Service could not get a cluster IP."""
    try:
        message = json.loads(body).get("message", "")
    except (ValueError, AttributeError):
        return ""
    return str(message)[:300]


def load_api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


# A kind the cluster did not serve is asked about again after this long (its CRD may be installed).
NOT_SERVED_RECHECK_SECONDS = 60.0


class Kube:
    def __init__(self, api_client: client.ApiClient | None = None) -> None:
        self.api_client = api_client or load_api_client()
        self._dynamic: DynamicClient | None = None
        # The dynamic client's discovery cache is not safe across threads (kopf runs handlers in a
        # pool), and a miss refetches every API group: resolve each kind once, under a lock.
        self._discovery = threading.Lock()
        self._resources: dict[tuple[str, str], Any] = {}
        self._not_served: dict[tuple[str, str], float] = {}

    @property
    def dynamic(self) -> DynamicClient:
        with self._discovery:
            if self._dynamic is None:
                try:
                    self._dynamic = DynamicClient(self.api_client)
                except Exception as exc:
                    raise _translate(exc, "API discovery") from exc
            return self._dynamic

    def _resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        found = self._resources.get(key)
        if found is not None:
            return found
        dynamic = self.dynamic
        with self._discovery:
            found = self._resources.get(key)
            if found is not None:
                return found
            checked = self._not_served.get(key)
            if checked is not None and time.monotonic() - checked < NOT_SERVED_RECHECK_SECONDS:
                raise KindNotServed(f"the cluster does not serve {kind} ({api_version})")
            try:
                found = dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError as exc:
                self._not_served[key] = time.monotonic()
                raise KindNotServed(f"the cluster does not serve {kind} ({api_version})") from exc
            except Exception as exc:
                raise _translate(exc, f"discover {kind} ({api_version})") from exc
            self._resources[key] = found
            return found

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        resource = self._resource(api_version, kind)
        try:
            result: Obj = resource.get(name=name, namespace=namespace).to_dict()
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _translate(exc, f"get {kind} {namespace}/{name}") from exc
        except Exception as exc:
            raise _translate(exc, f"get {kind} {namespace}/{name}") from exc
        return result

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str) -> list[Obj]:
        resource = self._resource(api_version, kind)
        try:
            items = resource.get(namespace=namespace, label_selector=label_selector).to_dict()["items"]
        except Exception as exc:
            raise _translate(exc, f"list {kind} in {namespace}") from exc
        return list(items)

    def apply(self, obj: Obj) -> Obj:
        """Server-side apply as field manager ``kvpilot``, taking back fields someone else changed."""
        meta = obj["metadata"]
        what = f"apply {obj['kind']} {meta['namespace']}/{meta['name']}"
        resource = self._resource(obj["apiVersion"], obj["kind"])
        try:
            result: Obj = resource.server_side_apply(
                body=obj,
                name=meta["name"],
                namespace=meta["namespace"],
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            ).to_dict()
        except Exception as exc:
            raise _translate(exc, what) from exc
        return result

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        resource = self._resource(api_version, kind)
        try:
            resource.delete(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise _translate(exc, f"delete {kind} {namespace}/{name}") from exc
        except Exception as exc:
            raise _translate(exc, f"delete {kind} {namespace}/{name}") from exc

    def get_llmdeployment(self, namespace: str, name: str) -> Obj | None:
        return self.get(API_VERSION, KIND, namespace, name)

    def patch_status(self, namespace: str, name: str, status: Obj, resource_version: str | None = None) -> Obj:
        """Merge-patch the status subresource; with a resourceVersion it fails on a concurrent write (409)."""
        resource = self._resource(API_VERSION, KIND)
        body: Obj = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        try:
            result: Obj = resource.status.patch(
                body=body, name=name, namespace=namespace, content_type="application/merge-patch+json"
            ).to_dict()
        except Exception as exc:
            raise _translate(exc, f"status of {namespace}/{name}") from exc
        return result


def ensure_peering(kube: Kube, name: str, namespaces: list[str]) -> None:
    """Create the kopf peering object(s) replicas elect a leader through, if they do not exist yet.

    kopf pauses a replica until it sees its peering object; creating it here means an install needs
    no extra manifest, and two replicas racing to create it is harmless (409 is success).
    """
    targets = [("ClusterKopfPeering", None)] if not namespaces else [("KopfPeering", ns) for ns in namespaces]
    for kind, namespace in targets:
        resource = kube._resource("kopf.dev/v1", kind)
        body: Obj = {"apiVersion": "kopf.dev/v1", "kind": kind, "metadata": {"name": name}}
        if namespace:
            body["metadata"]["namespace"] = namespace
        try:
            resource.create(body=body, namespace=namespace)
        except ApiException as exc:
            if exc.status != 409:
                raise _translate(exc, f"create {kind} {name}") from exc
