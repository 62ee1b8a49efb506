"""What differs between the pyspark 4.x releases the data sources run on.

Admission control for Python streaming sources (``ReadLimit``, ``latestOffset(start, limit)``,
``getDefaultReadLimit``) and ``SupportsTriggerAvailableNow`` came with pyspark 4.2. On older
releases these stand-ins keep the classes importable; Spark then calls ``latestOffset()``
without arguments and every micro-batch reads all that is available.
"""

from __future__ import annotations

from dataclasses import dataclass

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pyspark < 4.2

    class ReadLimit:  # type: ignore[no-redef]
        """Stand-in: no read limit reaches a source on this pyspark."""

    @dataclass
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    @dataclass
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        max_rows: int

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: Trigger.AvailableNow reaches Python sources from pyspark 4.2 on."""

        def prepareForTriggerAvailableNow(self) -> None:
            pass


__all__ = ["ReadAllAvailable", "ReadLimit", "ReadMaxRows", "SupportsTriggerAvailableNow"]
