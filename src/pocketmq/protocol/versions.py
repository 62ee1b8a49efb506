"""RocketMQ version names from the ordinal a remoting request carries in ``version``
(MQVersion.Version): the names in their declared order, the lookup as
MQVersion.getVersionDesc does it (an ordinal past the end is the last name) and the reverse
(Version.valueOf). No I/O here.
"""

from __future__ import annotations

from typing import Final

_BETA_3_0_0: Final = (
    "V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_BETA1", "V3_0_0_BETA2", "V3_0_0_BETA3",
    "V3_0_0_BETA4", "V3_0_0_BETA5", "V3_0_0_BETA6_SNAPSHOT", "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT", "V3_0_0_BETA7", "V3_0_0_BETA8_SNAPSHOT", "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT", "V3_0_0_BETA9", "V3_0_0_FINAL",
)  # fmt: skip


def _releases() -> list[str]:
    """After 3.0.0: each release as a SNAPSHOT and itself, 3.0.1 to 3.0.15, then x.y.0 to
    x.y.9 up to 5.9.9, except that 3.3 to 3.9 start at .1 (no 3.y.0 was declared)."""
    names = []
    minors = [(3, 0, range(1, 16))] + [
        (major, minor, range(1 if major == 3 and minor >= 3 else 0, 10))
        for major in (3, 4, 5)
        for minor in range(1 if major == 3 else 0, 10)
    ]
    for major, minor, patches in minors:
        for patch in patches:
            name = f"V{major}_{minor}_{patch}"
            names += [f"{name}_SNAPSHOT", name]
    return names


VERSION_NAMES: Final = (*_BETA_3_0_0, *_releases(), "HIGHER_VERSION")


def version_name(ordinal: int) -> str:
    """MQVersion.getVersionDesc: the name of a version ordinal ("V4_9_8" for 409)."""
    if ordinal < 0:
        return f"unknown version {ordinal}"
    return VERSION_NAMES[min(ordinal, len(VERSION_NAMES) - 1)]


_ORDINALS: Final = {name: ordinal for ordinal, name in enumerate(VERSION_NAMES)}


def version_ordinal(name: str) -> int | None:
    """MQVersion.Version.valueOf(name).ordinal(); None for a name it does not declare."""
    return _ORDINALS.get(name)
