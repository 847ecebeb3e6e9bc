"""vLLM version lines: parsing image tags and comparing release lines."""

from __future__ import annotations

import re
from functools import total_ordering

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-].*)?$")
_TAG_VERSION_RE = re.compile(r"v?(\d+\.\d+(?:\.\d+)?)")


@total_ordering
class VersionLine:
    """A vLLM release line such as 0.33 (patch releases share their line's flags and metrics)."""

    __slots__ = ("major", "minor")

    def __init__(self, major: int, minor: int) -> None:
        self.major = major
        self.minor = minor

    @classmethod
    def parse(cls, text: str) -> VersionLine:
        match = _VERSION_RE.match(text.strip())
        if not match:
            raise ValueError(f"not a vLLM version: {text!r} (expected e.g. 0.33 or 0.33.1)")
        return cls(int(match.group(1)), int(match.group(2)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionLine) and (self.major, self.minor) == (other.major, other.minor)

    def __lt__(self, other: VersionLine) -> bool:
        return (self.major, self.minor) < (other.major, other.minor)

    def __hash__(self) -> int:
        return hash((self.major, self.minor))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def __repr__(self) -> str:
        return f"VersionLine({self})"


OLDEST_SUPPORTED = VersionLine(0, 8)
NEWEST_SUPPORTED = VersionLine(0, 33)
DEFAULT_IMAGE = "vllm/vllm-openai:v0.33.0"


def version_from_image(image: str) -> str | None:
    """The vLLM version an image tag names (``vllm/vllm-openai:v0.33.0`` → ``0.33.0``), if any.

    A digest-pinned or ``latest`` image names no version; the caller must then ask for
    ``spec.engine.vllmVersion``, because rendering flags for a guessed version is how pods crash-loop.
    """
    if "@" in image:
        image = image.split("@", 1)[0]
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        return None
    match = _TAG_VERSION_RE.match(tag)
    return match.group(1) if match else None


def supported_lines() -> list[VersionLine]:
    return [VersionLine(0, m) for m in range(OLDEST_SUPPORTED.minor, NEWEST_SUPPORTED.minor + 1)]
