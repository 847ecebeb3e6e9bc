"""kopf registrations only; every handler delegates to kvpilot.handlers.

Run with `kvpilot run` (or `kopf run -m kvpilot.main`).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from kvpilot import handlers, telemetry
from kvpilot.api.v1alpha1 import GROUP, PLURAL, VERSION
from kvpilot.config import CONFIG
from kvpilot.errors import KvpilotError, TransientError
from kvpilot.kube import Kube, ensure_peering

MANAGED = {"app.kubernetes.io/managed-by": "kvpilot"}


class _QuietTimers(logging.Filter):
    """Drop kopf's "Timer '…' succeeded" lines: they repeat for every object every period."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.levelno <= logging.INFO and str(record.msg).startswith("Timer ") and "succeeded" in str(record.msg)
        )


logging.getLogger("kopf.objects").addFilter(_QuietTimers())


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Progress and diff-base go to annotations: status stays ours, and Argo CD ignores both.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kvpilot.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="kvpilot.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # our own events say what happened; no "handler succeeded" noise
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    settings.execution.max_workers = 8
    settings.peering.lifetime = CONFIG.peering_lifetime_seconds
    try:
        telemetry.serve(CONFIG.metrics_address)
    except OSError as exc:  # a busy port must not stop the operator; say so and carry on
        logging.getLogger("kvpilot").warning("metrics not served on %s: %s", CONFIG.metrics_address, exc)
    memo.kube = Kube()
    memo.autoscaler = handlers.AutoscalerMemory()
    if not CONFIG.standalone:
        ensure_peering(memo.kube, CONFIG.peering_name, CONFIG.namespaces)


def _reconcile(body: kopf.Body, memo: kopf.Memo) -> None:
    try:
        handlers.reconcile(handlers.plain(body), memo.kube, kopf.event)
    except TransientError as exc:
        raise kopf.TemporaryError(str(exc), delay=exc.delay) from exc


@kopf.on.resume(GROUP, VERSION, PLURAL, backoff=5)
@kopf.on.create(GROUP, VERSION, PLURAL, backoff=5)
@kopf.on.update(GROUP, VERSION, PLURAL, backoff=5)
def reconcile_llmdeployment(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(body, memo)


@kopf.timer(GROUP, VERSION, PLURAL, interval=CONFIG.resync_seconds, initial_delay=CONFIG.resync_seconds)
def repair_drift(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(body, memo)


def _autoscaling_enabled(spec: kopf.Spec, **_: Any) -> bool:
    return bool((spec.get("autoscaling") or {}).get("enabled"))


@kopf.timer(GROUP, VERSION, PLURAL, interval=CONFIG.autoscale_seconds, when=_autoscaling_enabled)
def autoscale(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    try:
        handlers.autoscale(handlers.plain(body), memo.kube, memo.autoscaler, kopf.event)
    except TransientError as exc:
        logger.warning("autoscaler pass skipped (next one in %ss): %s", CONFIG.autoscale_seconds, exc)


@kopf.on.event("apps", "v1", "deployments", labels=MANAGED)
@kopf.on.event("", "v1", "services", labels=MANAGED)
def child_changed(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    try:
        handlers.reconcile_owner_of(handlers.plain(body), memo.kube, kopf.event)
    except KvpilotError as exc:  # transient or not, the resync timer retries; one line, no traceback
        logger.warning("child event not acted on (the resync timer will): %s", exc)
