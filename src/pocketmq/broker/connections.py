"""One client connection as the admin answers describe it: RocketMQ's ``Connection`` body
class (clientId, clientAddr, language, version), shared by the consumer and producer tables.
No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.protocol.codes import LanguageCode

# A client that never said which language it speaks (a gRPC client) counts as Java, the
# default of RocketMQ's ClientChannelInfo.
DEFAULT_LANGUAGE = LanguageCode.JAVA.name


@dataclass(frozen=True, slots=True)
class Connection:
    client_id: str
    client_addr: str
    language: str = DEFAULT_LANGUAGE
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        """As fastjson writes RocketMQ's Connection."""
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }
