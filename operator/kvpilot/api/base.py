"""The base of every API model: camelCase on the wire, unknown fields refused, rules checked."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from kvpilot.api.rules import CelRule


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
    )

    cel_rules: ClassVar[tuple[CelRule, ...]] = ()

    @model_validator(mode="after")
    def _check_cel_rules(self) -> Any:
        for rule in type(self).cel_rules:
            if not rule.check(self):
                raise ValueError(rule.message)
        return self

    def wire(self) -> dict[str, Any]:
        """The object as the API server stores it: aliases, no unset optional fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
