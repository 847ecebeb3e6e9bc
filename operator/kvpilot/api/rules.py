"""Cross-field rules, each written once with both of its faces.

A rule is a CEL expression (emitted into the CRD as ``x-kubernetes-validations`` so the API server
rejects a bad object at admission) and a Python predicate (run by the pydantic model so ``kvpilot
plan`` and the operator reject the same object with the same message).  Keeping both in one record
is what stops the two from drifting apart; ``tests/unit/test_cel_rules.py`` evaluates both on the
same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CelRule:
    rule: str
    message: str
    check: Callable[[Any], bool]
    field_path: str = ""
    reason: str = "FieldValueInvalid"

    def as_validation(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
            out["reason"] = self.reason
        return out


def cel_field(name: str, default: object) -> str:
    """CEL for ``self.<name>`` falling back to the same default the pydantic model uses.

    The CRD carries no defaults (profiles fill unset fields), so a rule must read an absent field
    as its model default, or admission and the planner would disagree.
    """
    if isinstance(default, bool):
        literal = "true" if default else "false"
    elif isinstance(default, str):
        literal = f"'{default}'"
    else:
        literal = repr(default)
    return f"(has(self.{name}) ? self.{name} : {literal})"
