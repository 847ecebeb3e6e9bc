"""The one error hierarchy of kvpilot, grouped by what the caller can do about it.

    KvpilotError                    base of everything kvpilot raises on purpose
    ├── SpecError                   the user's input is wrong: permanent, never retried
    │   ├── CatalogError            an unknown GPU or model, or a config.json missing a field
    │   ├── DoesNotFitError         the model cannot be served as asked; carries the fixes
    │   └── RenderError             a flag or env var the target vLLM would refuse
    └── TransientError              the world is not ready yet (API or network trouble): retry with backoff

Every ``SpecError`` names the field path it is about (``spec.engine.extraArgs[2]``), so the CLI can
print one line and the operator can write it into the ``SpecValid`` condition.  The operator maps
``SpecError`` to kopf's permanent error and ``TransientError`` to kopf's temporary error at the
handler boundary; nothing below that boundary imports kopf.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class KvpilotError(Exception):
    """Base class of every error kvpilot raises on purpose."""


@dataclass(frozen=True)
class FieldIssue:
    """One thing wrong with the input: where it is and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(KvpilotError):
    """The input is wrong; retrying will not help.  Holds one or more field issues."""

    reason = "InvalidSpec"

    def __init__(self, issues: list[FieldIssue] | FieldIssue | str, path: str = "") -> None:
        if isinstance(issues, str):
            issues = [FieldIssue(path, issues)]
        elif isinstance(issues, FieldIssue):
            issues = [issues]
        self.issues: list[FieldIssue] = issues
        super().__init__("; ".join(str(i) for i in issues))

    @property
    def path(self) -> str:
        return self.issues[0].path if self.issues else ""


class CatalogError(SpecError):
    """An unknown GPU type or model, or a model config that lacks what the estimator needs."""

    reason = "UnknownModelOrGPU"


class RenderError(SpecError):
    """The rendered vLLM command line would be refused by the target vLLM version."""

    reason = "UnsupportedFlag"


@dataclass(frozen=True)
class Fix:
    """One way to make a plan fit, with the numbers it would give."""

    title: str
    detail: str


class DoesNotFitError(SpecError):
    """The model and workload do not fit the requested GPUs; ``fixes`` says what would."""

    reason = "DoesNotFit"

    def __init__(self, message: str, path: str = "spec", fixes: list[Fix] | None = None) -> None:
        super().__init__(message, path)
        self.fixes: list[Fix] = fixes or []

    def __str__(self) -> str:
        text = super().__str__()
        if self.fixes:
            text += " Fixes, in order: " + "; ".join(f"{f.title} ({f.detail})" for f in self.fixes)
        return text


@dataclass
class TransientError(KvpilotError):
    """Something outside kvpilot is not ready yet; the caller retries after ``delay`` seconds."""

    message: str
    delay: float = 10.0
    cause: BaseException | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return self.message
