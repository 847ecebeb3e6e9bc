"""Operator settings from flags and environment (flags win), shared by `kvpilot run` and kvpilot.main."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _env_list(name: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, "").split(",") if v.strip()]


@dataclass
class OperatorConfig:
    namespaces: list[str] = field(default_factory=lambda: _env_list("KVPILOT_NAMESPACES"))
    log_format: str = os.environ.get("KVPILOT_LOG_FORMAT", "text")
    health_address: str = os.environ.get("KVPILOT_HEALTH_ADDRESS", "0.0.0.0:8080")
    # The operator's own /metrics; off unless set (the Helm chart sets 0.0.0.0:9090).
    metrics_address: str = os.environ.get("KVPILOT_METRICS_ADDRESS", "off")
    resync_seconds: float = float(os.environ.get("KVPILOT_RESYNC_SECONDS", "60"))
    autoscale_seconds: float = float(os.environ.get("KVPILOT_AUTOSCALE_SECONDS", "15"))
    standalone: bool = os.environ.get("KVPILOT_STANDALONE", "") == "1"
    peering_name: str = os.environ.get("KVPILOT_PEERING_NAME", "kvpilot")
    # How long a replica's peering entry outlives its last keep-alive: a standby takes over from a crashed
    # replica within this. kopf refreshes the entry 5-10 s before it expires, so shorter means more writes.
    peering_lifetime_seconds: int = int(os.environ.get("KVPILOT_PEERING_LIFETIME_SECONDS", "60"))
    verbose: bool = os.environ.get("KVPILOT_VERBOSE", "") == "1"

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


CONFIG = OperatorConfig()
