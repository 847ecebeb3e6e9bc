"""Autoscaling policies side by side: kvpilot's and the ones our users would otherwise run.

Each is a function of the same Observation the simulator gives every policy, returning the replica
count it wants. Formulas and defaults follow each project's public documentation, cited per policy;
where a policy needs a target the docs leave to the user, the choice is stated.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from kvpilot.autoscale.decision import ScaleState, Targets, decide
from kvpilot.simulate.engine import Observation, Policy


def static(replicas: int) -> Policy:
    return lambda obs: replicas


@dataclass
class Hpa:
    """Kubernetes HPA (autoscaling/v2) on vllm:num_requests_waiting as an AverageValue per pod.

    desired = ceil(current × average / target), skipped within the 10 % tolerance; scale-down takes the
    highest recommendation of the last 300 s (stabilizationWindowSeconds default); scale-up may add
    max(4 pods, 100 %) per 15 s (the default behavior). Source: kubernetes.io, "Horizontal Pod
    Autoscaling" (algorithm details, default behavior). Target: 5 waiting per pod (our choice).
    """

    target: float = 5.0
    min_replicas: int = 1
    max_replicas: int = 64
    tolerance: float = 0.1
    stabilization: float = 300.0
    history: deque[tuple[float, int]] = field(default_factory=deque)

    def __call__(self, obs: Observation) -> int:
        current = obs.replicas
        if not self.history:
            # The HPA was running before the trace began: its window already holds the current count.
            self.history.append((obs.now - self.stabilization, current))
        if obs.fleet is None or obs.ready == 0:
            return max(current, self.min_replicas)
        average = obs.fleet.waiting / obs.ready
        ratio = average / self.target
        desired = current if abs(ratio - 1) <= self.tolerance else math.ceil(obs.ready * ratio)
        desired = max(self.min_replicas, min(self.max_replicas, desired))
        self.history.append((obs.now, desired))
        while self.history and self.history[0][0] < obs.now - self.stabilization:
            self.history.popleft()
        if desired < current:
            desired = min(current, max(r for _, r in self.history))
        if desired > current:
            desired = min(desired, max(current + 4, 2 * current))
        return desired


@dataclass
class Keda(Hpa):
    """KEDA's Prometheus scaler on the same query: an HPA underneath, polled every 30 s (pollingInterval),
    and with minReplicaCount 0 (the default) it deactivates to zero once the query reads 0
    (activationThreshold 0) for cooldownPeriod 300 s. Source: keda.sh, "Scaling Deployments" and the
    Prometheus scaler page.
    """

    min_replicas: int = 0
    polling: float = 30.0
    cooldown: float = 300.0
    last_poll: float = -math.inf
    last_active: float = 0.0
    last_answer: int = 1

    def __call__(self, obs: Observation) -> int:
        if obs.now - self.last_poll < self.polling:
            return self.last_answer
        self.last_poll = obs.now
        active = obs.fleet is not None and (obs.fleet.waiting > 0 or obs.fleet.running > 0)
        if active or (obs.replicas == 0 and obs.fleet is None):
            self.last_active = obs.now
        if obs.replicas == 0:
            # At zero KEDA sees the metric from Prometheus; here: anything pending at the router.
            self.last_answer = 1 if (obs.fleet is not None and obs.fleet.waiting > 0) else 0
            return self.last_answer
        if not active and obs.now - self.last_active >= self.cooldown:
            self.last_answer = 0
            return 0
        self.last_answer = max(1, Hpa.__call__(self, obs))
        return self.last_answer


@dataclass
class Kpa:
    """Knative KPA on concurrency: desired = ceil(average concurrency over the 60 s stable window /
    (target × 0.7 utilization)); when the 6 s panic window (10 % of stable) reads 2× capacity, panic and
    never scale down until it calms; scale-down at most ÷2 per step (max-scale-down-rate 2).
    Source: knative.dev, "Configuring the autoscaler" / KPA docs. Target: maxNumSeqs per pod (a vLLM
    replica's batch), so 70 % of it is the usual headroom.
    """

    target: float = 64.0
    utilization: float = 0.7
    stable: float = 60.0
    min_replicas: int = 1
    samples: deque[tuple[float, float]] = field(default_factory=deque)
    panic_until: float = -math.inf

    def __call__(self, obs: Observation) -> int:
        if obs.fleet is None:
            return max(obs.replicas, self.min_replicas)
        concurrency = obs.fleet.running + obs.fleet.waiting
        self.samples.append((obs.now, concurrency))
        while self.samples and self.samples[0][0] < obs.now - self.stable:
            self.samples.popleft()
        per_pod = self.target * self.utilization
        stable_avg = sum(c for _, c in self.samples) / len(self.samples)
        desired_stable = math.ceil(stable_avg / per_pod)
        desired_panic = math.ceil(concurrency / per_pod)
        if obs.ready and concurrency / (obs.ready * per_pod) >= 2.0:
            self.panic_until = obs.now + self.stable
        if obs.now < self.panic_until:
            return max(obs.replicas, desired_panic, self.min_replicas)
        return max(self.min_replicas, desired_stable, math.ceil(obs.replicas / 2))


@dataclass
class Apa:
    """AIBrix APA on KV-cache usage with target 0.5: desired = ceil(ready × usage / target) outside a
    tolerance band (+10 % up, -20 % down), with a 60 s scale-down delay. Source: AIBrix docs,
    "Autoscaling" (APA algorithm, fluctuation tolerances).
    """

    target: float = 0.5
    up_tolerance: float = 0.1
    down_tolerance: float = 0.2
    down_delay: float = 60.0
    min_replicas: int = 1
    low_since: float | None = None

    def __call__(self, obs: Observation) -> int:
        if obs.fleet is None or obs.fleet.kv_usage_mean is None:
            return max(obs.replicas, self.min_replicas)
        ratio = obs.fleet.kv_usage_mean / self.target
        if ratio > 1 + self.up_tolerance:
            self.low_since = None
            return max(obs.replicas, math.ceil(obs.ready * ratio))
        if ratio < 1 - self.down_tolerance:
            self.low_since = self.low_since if self.low_since is not None else obs.now
            if obs.now - self.low_since >= self.down_delay:
                return max(self.min_replicas, math.ceil(obs.ready * ratio))
        else:
            self.low_since = None
        return obs.replicas


@dataclass
class Saturation:
    """llm-d-style saturation scaling: a replica is saturated at KV ≥ 0.80 or ≥ 5 queued requests; add
    one when any is saturated, remove one when every replica has spare capacity (KV < 0.4, nothing
    queued) for 5 minutes. Source: llm-d workload-variant-autoscaler docs (saturation-based scaling).
    """

    kv_saturated: float = 0.80
    queue_saturated: float = 5.0
    kv_spare: float = 0.4
    hold: float = 300.0
    min_replicas: int = 1
    spare_since: float | None = None

    def __call__(self, obs: Observation) -> int:
        if obs.fleet is None or not obs.kv_per_replica:
            return max(obs.replicas, self.min_replicas)
        saturated = any(
            kv >= self.kv_saturated or q >= self.queue_saturated
            for kv, q in zip(obs.kv_per_replica, obs.waiting_per_replica, strict=True)
        )
        if saturated:
            self.spare_since = None
            return obs.replicas + 1
        spare = all(kv < self.kv_spare for kv in obs.kv_per_replica) and obs.fleet.waiting == 0
        if not spare:
            self.spare_since = None
            return obs.replicas
        self.spare_since = self.spare_since if self.spare_since is not None else obs.now
        if obs.now - self.spare_since >= self.hold:
            self.spare_since = obs.now
            return max(self.min_replicas, obs.replicas - 1)
        return obs.replicas


@dataclass
class Kvpilot:
    """kvpilot's own decision function (kvpilot.autoscale.decision.decide), exactly as the operator runs it."""

    targets: Targets
    state: ScaleState = field(default_factory=ScaleState)

    def __call__(self, obs: Observation) -> int:
        decision = decide(obs.fleet, obs.replicas, obs.ready, self.targets, self.state, obs.now)
        self.state = decision.state
        return decision.replicas
