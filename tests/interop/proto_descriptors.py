"""Print, as JSON, every message, enum and service of the given generated protobuf modules:
fields with number, type, repetition, referenced type and presence; enum values; methods
with their types and streaming. Run once per module set, in its own process, because
pocketmq's and the 5.x client's generated code register the same names.

Usage: proto_descriptors.py MODULE...
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any


def _message(md: Any, out: dict[str, Any]) -> None:
    out[md.full_name] = {
        f.name: [
            f.number,
            f.type,
            f.is_repeated,
            (f.message_type or f.enum_type).full_name if (f.message_type or f.enum_type) else "",
            f.has_presence,
        ]
        for f in md.fields
    }
    for nested in md.nested_types:
        _message(nested, out)
    for enum in md.enum_types:
        out[enum.full_name] = {v.name: v.number for v in enum.values}


def main() -> None:
    out: dict[str, Any] = {}
    for name in sys.argv[1:]:
        fd = importlib.import_module(name).DESCRIPTOR
        for md in fd.message_types_by_name.values():
            _message(md, out)
        for enum in fd.enum_types_by_name.values():
            out[enum.full_name] = {v.name: v.number for v in enum.values}
        for sd in fd.services_by_name.values():
            out[sd.full_name] = {
                m.name: [
                    m.input_type.full_name,
                    m.output_type.full_name,
                    m.client_streaming,
                    m.server_streaming,
                ]
                for m in sd.methods
            }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
