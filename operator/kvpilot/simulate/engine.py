"""A discrete-event simulation of a vLLM fleet under an autoscaling policy.

Each replica runs vLLM's V1 scheduling loop step by step: admit waiting requests first-come
first-served while batch slots and KV blocks allow, decode one token for every running sequence,
fill the rest of the step's token budget with prefill chunks (chunked prefill), and when the KV cache
runs out preempt the newest sequence by recompute. Step time comes from ``ReplicaModel``. New replicas
pay a cold start; metrics reach the policy with scrape lag; the policy acts once per sync period;
removed replicas stop taking requests and drain.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kvpilot.metrics.parse import Histogram
from kvpilot.metrics.signals import FleetSignals
from kvpilot.simulate.perf import ReplicaModel
from kvpilot.simulate.traces import Request

QUEUE_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0)
BLOCK = 16


@dataclass
class SimRequest:
    req: Request
    prefilled: int = 0
    generated: int = 0
    admitted_at: float | None = None
    first_token_at: float | None = None
    done_at: float | None = None
    preemptions: int = 0

    @property
    def context(self) -> int:
        return self.prefilled + self.generated

    def blocks(self) -> int:
        return math.ceil(max(self.context, 1) / BLOCK)


@dataclass
class Replica:
    id: int
    model: ReplicaModel
    created_at: float
    ready_at: float
    clock: float = 0.0
    waiting: deque[SimRequest] = field(default_factory=deque)
    running: list[SimRequest] = field(default_factory=list)
    draining: bool = False
    removed_at: float | None = None
    used: int = 0  # KV blocks held by the running sequences, kept up to date as they change

    @property
    def capacity_blocks(self) -> int:
        return self.model.kv_capacity_tokens // BLOCK

    def used_blocks(self) -> int:
        return self.used

    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    def _admit(self, admitted: list[SimRequest]) -> None:
        used = self.used_blocks()
        while self.waiting and len(self.running) < self.model.max_num_seqs:
            head = self.waiting[0]
            need = math.ceil((head.req.input_tokens + 1) / BLOCK)
            if used + need > self.capacity_blocks and self.running:
                break
            self.waiting.popleft()
            if head.admitted_at is None:
                head.admitted_at = self.clock
                admitted.append(head)
            self.running.append(head)
            self.used += head.blocks()
            used += need

    def run_until(self, t: float, admitted: list[SimRequest], finished: list[SimRequest]) -> None:
        self.clock = max(self.clock, self.ready_at)
        while self.clock < t:
            self._admit(admitted)
            if not self.running:
                self.clock = t
                return
            if all(r.prefilled >= r.req.input_tokens for r in self.running):
                self._decode_run(t)
            else:
                self._step()
            self._retire(finished)

    def _step(self) -> None:
        """One engine step: decode every prefilled sequence, fill the rest of the budget with prefill chunks."""
        budget = self.model.max_num_batched_tokens
        decoders = [r for r in self.running if r.prefilled >= r.req.input_tokens]
        budget -= len(decoders)
        context = sum(r.context for r in self.running)
        attended = sum(r.context for r in decoders)
        chunks: list[tuple[SimRequest, int]] = []
        for r in self.running:
            if budget <= 0:
                break
            if r.prefilled < r.req.input_tokens:
                take = min(budget, r.req.input_tokens - r.prefilled)
                chunks.append((r, take))
                attended += take * (r.prefilled + take // 2)
                budget -= take
        prefill = sum(n for _, n in chunks)
        self.clock += self.model.step_seconds(len(decoders), prefill, context, attended)
        for r in decoders:
            if r.context % BLOCK == 0 and r.context:
                self.used += 1  # the new token opens a block
            r.generated += 1
            if r.first_token_at is None:
                r.first_token_at = self.clock
        for r, n in chunks:
            self.used -= r.blocks()
            r.prefilled += n
            if r.prefilled >= r.req.input_tokens and r.first_token_at is None:
                r.first_token_at = self.clock  # the last prefill chunk samples the first token
                r.generated = 1
            self.used += r.blocks()

    def _decode_run(self, t: float) -> None:
        """Consecutive decode-only steps, without touching each sequence every step.

        While every running sequence is decoding, nothing changes the batch until one finishes, the KV
        cache could overflow or the clock passes ``t`` (admission cannot: it already failed at the top
        of the step and the cache only fills). So the steps differ only in their context length, and
        their times can be summed first and the sequences advanced once; the result is the same as
        stepping one at a time, at a fraction of the cost on long generations.
        """
        running = self.running
        n = len(running)
        steps = min(r.req.output_tokens - r.generated for r in running)
        spare_blocks = self.capacity_blocks - self.used_blocks()
        # Each sequence gains at most one block per BLOCK steps: bound the run so no step can overflow.
        steps = max(1, min(steps, BLOCK * (spare_blocks // n)))
        context = sum(r.context for r in running)
        taken = 0
        step_seconds = self.model.step_seconds
        clock = self.clock
        while taken < steps and clock < t:
            clock += step_seconds(n, 0, context, context)
            context += n
            taken += 1
        self.clock = clock
        for r in running:
            r.generated += taken
        self.used = sum(r.blocks() for r in running)

    def _retire(self, finished: list[SimRequest]) -> None:
        if any(r.generated >= r.req.output_tokens for r in self.running):
            done = [r for r in self.running if r.generated >= r.req.output_tokens]
            self.running = [r for r in self.running if r.generated < r.req.output_tokens]
            for r in done:
                r.done_at = self.clock
                self.used -= r.blocks()
                finished.append(r)
        while len(self.running) > 1 and self.used_blocks() > self.capacity_blocks:
            victim = self.running.pop()  # vLLM preempts the newest by recompute
            self.used -= victim.blocks()
            victim.prefilled = victim.generated = 0
            victim.preemptions += 1
            self.waiting.appendleft(victim)


@dataclass(frozen=True)
class Observation:
    """What a policy sees at a sync: metrics as of the last scrape, replica counts as of now."""

    now: float
    replicas: int  # desired count currently in force (ready + starting)
    ready: int
    fleet: FleetSignals | None
    kv_per_replica: tuple[float, ...]
    waiting_per_replica: tuple[float, ...]
    running_per_replica: tuple[float, ...]


Policy = Callable[[Observation], int]


@dataclass(frozen=True)
class SimConfig:
    cold_start_seconds: float = 180.0
    scrape_seconds: float = 15.0
    sync_seconds: float = 15.0
    window_seconds: float = 60.0
    slo_queue_seconds: float = 2.0
    gpus_per_replica: int = 1
    initial_replicas: int = 1
    max_replicas: int = 64
    drain_seconds: float = 120.0


@dataclass
class SimResult:
    policy: str
    requests: list[SimRequest]
    gpu_seconds: float
    scale_events: list[tuple[float, int, int]]
    timeline: list[tuple[float, int, int, float]]  # (t, desired, ready, arrivals/s)
    duration: float

    def waits(self) -> list[float]:
        return sorted(
            (r.admitted_at if r.admitted_at is not None else self.duration) - r.req.arrival for r in self.requests
        )


def _quantile_hist(waits: list[float]) -> Histogram | None:
    if not waits:
        return None
    bounds = (*QUEUE_BUCKETS, math.inf)
    ordered = sorted(waits)
    cumulative = [float(bisect.bisect_right(ordered, b)) for b in bounds]
    return Histogram(tuple(zip(bounds, cumulative, strict=True)), float(len(waits)), float(sum(waits)))


def _due(t: float, period: float, tick: float) -> bool:
    """Whether a ``period`` boundary falls in the tick that ends at ``t``."""
    return t % period < tick - 1e-9 or math.isclose(t % period, period, abs_tol=1e-9)


def simulate(requests: list[Request], model: ReplicaModel, policy: Policy, name: str, cfg: SimConfig) -> SimResult:
    sim = [SimRequest(r) for r in requests]
    replicas: list[Replica] = [Replica(i, model, 0.0, 0.0) for i in range(cfg.initial_replicas)]
    next_id = cfg.initial_replicas
    pending: deque[SimRequest] = deque()
    admitted: list[SimRequest] = []
    finished: list[SimRequest] = []
    events: list[tuple[float, int, int]] = []
    timeline: list[tuple[float, int, int, float]] = []
    arrivals_in_window: deque[float] = deque()
    admitted_log: deque[tuple[float, float]] = deque()  # (admit time, queue wait)
    finished_log: deque[float] = deque()
    last_obs: Observation | None = None
    end = (requests[-1].arrival if requests else 0.0) + 60.0
    tick = min(cfg.scrape_seconds, cfg.sync_seconds)
    i, t = 0, 0.0

    def live() -> list[Replica]:
        return [r for r in replicas if not r.draining]

    def route(req: SimRequest, now: float) -> None:
        ready = [r for r in live() if r.ready_at <= now]
        if not ready:
            pending.append(req)
            return
        min(ready, key=lambda r: (r.load(), r.id)).waiting.append(req)

    while t < end or any(r.running or r.waiting for r in replicas) or pending:
        t_next = t + tick
        while i < len(sim) and sim[i].req.arrival < t_next:
            arrival = sim[i].req.arrival
            for r in replicas:
                r.run_until(arrival, admitted, finished)
            arrivals_in_window.append(arrival)
            route(sim[i], arrival)
            i += 1
        for r in replicas:
            r.run_until(t_next, admitted, finished)
        t = t_next
        if pending and any(r.ready_at <= t for r in live()):
            for waiting_request in list(pending):
                pending.popleft()
                route(waiting_request, t)
        for a in admitted:
            at = a.admitted_at if a.admitted_at is not None else t
            admitted_log.append((at, at - a.req.arrival))
        admitted.clear()
        finished_log.extend(f.done_at or t for f in finished)
        finished.clear()
        while finished_log and finished_log[0] < t - cfg.window_seconds:
            finished_log.popleft()
        for r in replicas:
            if (
                r.draining
                and r.removed_at is None
                and ((not r.running and not r.waiting) or t - r.clock > cfg.drain_seconds)
            ):
                r.removed_at = t
        while arrivals_in_window and arrivals_in_window[0] < t - cfg.window_seconds:
            arrivals_in_window.popleft()
        while admitted_log and admitted_log[0][0] < t - cfg.window_seconds:
            admitted_log.popleft()

        if _due(t, cfg.scrape_seconds, tick):
            ready = [r for r in live() if r.ready_at <= t]
            kv = tuple(r.used_blocks() / max(r.capacity_blocks, 1) for r in ready)
            waiting = tuple(float(len(r.waiting)) for r in ready)
            running = tuple(float(len(r.running)) for r in ready)
            hist = _quantile_hist([w for _, w in admitted_log])
            fleet = None
            if ready:
                fleet = FleetSignals(
                    replicas_reporting=len(ready),
                    kv_usage_mean=sum(kv) / len(kv),
                    kv_usage_max=max(kv),
                    waiting=sum(waiting) + len(pending),
                    running=sum(running),
                    queue_wait_p90=hist.quantile(0.9) if hist else None,
                    queue_wait_p90_bound=hist.quantile_bound(0.9) if hist else None,
                    queue_wait_mean=hist.mean if hist else None,
                    ttft_p90=None,
                    finished_per_second=len(finished_log) / min(cfg.window_seconds, max(t, cfg.scrape_seconds)),
                    preemptions_per_second=0.0,
                    generation_tokens_per_second=None,
                )
            last_obs = Observation(t, len(live()), len(ready), fleet, kv, waiting, running)
        if last_obs is not None and _due(t, cfg.sync_seconds, tick):
            obs = Observation(
                last_obs.now,
                len(live()),
                len([r for r in live() if r.ready_at <= t]),
                last_obs.fleet,
                last_obs.kv_per_replica,
                last_obs.waiting_per_replica,
                last_obs.running_per_replica,
            )
            want = max(0, min(cfg.max_replicas, policy(obs)))
            have = len(live())
            if want > have:
                for _ in range(want - have):
                    replicas.append(Replica(next_id, model, t, t + cfg.cold_start_seconds, clock=t))
                    next_id += 1
            elif want < have:
                # Remove starting replicas first, then the least loaded ready ones; they drain.
                order = sorted(live(), key=lambda r: (r.ready_at <= t, r.load(), -r.id))
                for r in order[: have - want]:
                    r.draining = True
                    pending.extend(r.waiting)
                    r.waiting.clear()
                    if r.ready_at > t:
                        r.removed_at = t
            if want != have:
                events.append((t, have, want))
            timeline.append(
                (t, want, len([r for r in live() if r.ready_at <= t]), len(arrivals_in_window) / cfg.window_seconds)
            )
        if t > end + 3600:  # a policy that never serves the backlog: stop, and count the rest as late
            break

    gpu_seconds = sum(((r.removed_at if r.removed_at is not None else t) - r.created_at) for r in replicas)
    return SimResult(name, sim, gpu_seconds * cfg.gpus_per_replica, events, timeline, t)
