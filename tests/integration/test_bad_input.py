"""The bad-input catalogue (tests/bad_inputs.py) against the real API server and the running operator.

Each case is either refused at admission with a message naming the field, or admitted and reported as
SpecValid=False naming the field; never a child object, never an operator crash or traceback, never
a retry storm (the object's resourceVersion stays put across several resyncs). Prints case → outcome.
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from kvpilot.localcluster.controlplane import ControlPlane
from kvpilot.localcluster.process import OperatorProcess
from tests.bad_inputs import CASES, SENTINEL_TOKEN
from tests.integration.helpers import eventually
from tests.integration.test_operator import condition, deployment, get_llmd, handled, ns  # noqa: F401 - ns is a fixture


def test_every_bad_input_is_refused_or_reported_without_harm(
    control_plane: ControlPlane,
    operator: OperatorProcess,
    api: Any,
    ns: str,  # noqa: F811
) -> None:
    log_mark = len(operator.log_text())
    outcomes: dict[str, str] = {}
    admitted: list[str] = []
    for case in CASES:
        obj = case.build(case.id)
        obj["metadata"]["namespace"] = ns
        result = control_plane.kubectl(
            "apply", "--server-side", "-f", "-", input=yaml.safe_dump(obj, width=10**7), timeout=60
        )
        if result.returncode != 0:
            message = result.stderr.strip().replace("\n", " ")
            assert case.caught_by == "admission", f"{case.id}: refused at admission, expected the planner: {message}"
            assert case.field in message, f"{case.id}: {message[:500]}"
            assert "Traceback" not in message and SENTINEL_TOKEN not in message
            outcomes[case.id] = "refused at admission: " + message[:110]
        else:
            assert case.caught_by == "planner", f"{case.id} was admitted; the schema should refuse it"
            admitted.append(case.id)

    def all_reported() -> bool:
        for name in admitted:
            obj = get_llmd(api, ns, name)
            spec_valid = condition(obj, "SpecValid")
            if not spec_valid or spec_valid["status"] != "False" or not handled(obj):
                return False
        return True

    eventually(all_reported, 60, what="SpecValid=False on every admitted bad input")
    versions = {}
    for name in admitted:
        obj = get_llmd(api, ns, name)
        spec_valid = condition(obj, "SpecValid")
        assert spec_valid is not None
        case = next(c for c in CASES if c.id == name)
        assert case.field in spec_valid["message"], f"{name}: {spec_valid['message']}"
        assert SENTINEL_TOKEN not in yaml.safe_dump(obj["status"])
        assert deployment(api, ns, name) is None, f"{name}: a child Deployment was created from an invalid spec"
        versions[name] = obj["metadata"]["resourceVersion"]
        outcomes[name] = f"SpecValid=False ({spec_valid['reason']}): " + spec_valid["message"][:90]

    time.sleep(12)  # more than two resyncs of the test operator (5 s)
    for name in admitted:
        assert get_llmd(api, ns, name)["metadata"]["resourceVersion"] == versions[name], f"{name} keeps being written"
    assert operator.proc is not None and operator.proc.poll() is None, "the operator died"
    log = operator.log_text()[log_mark:]
    assert "Traceback" not in log, log[-3000:]
    assert SENTINEL_TOKEN not in log
    events = control_plane.kubectl("get", "events", "-n", ns, "-o", "yaml", check=True).stdout
    assert SENTINEL_TOKEN not in events

    width = max(len(c.id) for c in CASES)
    print(f"\n{'case':<{width}}  outcome")
    for case in CASES:
        print(f"{case.id:<{width}}  {outcomes[case.id]}")
    assert len(outcomes) == len(CASES) >= 40
