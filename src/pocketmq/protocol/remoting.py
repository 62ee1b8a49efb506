"""RemotingCommand frames of RocketMQ's 4.x remoting protocol. No I/O here.

Frame, big-endian::

    length (4)          bytes that follow: 4 + header length + body length
    serialize type (1)  0 = JSON, 1 = ROCKETMQ (binary)
    header length (3)
    header              the command's fields, in the serialize type
    body                the rest of the frame

JSON header (RemotingCommand as fastjson writes it)::

    {"code":10,"language":"JAVA","version":401,"opaque":7,"flag":0,"remark":"...",
     "extFields":{"topic":"T",...},"serializeTypeCurrentRPC":"JSON"}

ROCKETMQ header (RocketMQSerializable)::

    code (2) | language (1) | version (2) | opaque (4) | flag (4)
    | remark length (4) + remark | ext fields length (4) + ext fields
    ext fields = (key length (2) + key + value length (4) + value) repeated

Flag bit 0 marks a response, bit 1 a oneway request. Peers are parsed leniently where real
clients are loose (the C++ client sends numbers among the extFields strings; language may be a
name or a number) and strictly where the frame would otherwise be ambiguous.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from pocketmq.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.protocol import native
from pocketmq.protocol.codes import LanguageCode, SerializeType

FLAG_RESPONSE: Final = 0x1
FLAG_ONEWAY: Final = 0x2
# NettyDecoder's default frame limit (com.rocketmq.remoting.frameMaxLength).
DEFAULT_MAX_FRAME: Final = 16 * 1024 * 1024
# What we report as our version: MQVersion.Version.V4_9_4.ordinal(), a 4.x broker to clients.
CURRENT_VERSION: Final = 401

_PREFIX = struct.Struct(">iI")  # length, serialize type + header length
_BIN_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")

_LANGUAGE_BY_NAME = {m.name: m for m in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    code: int
    language: int = LanguageCode.PYTHON
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
    ) -> RemotingCommand:
        return cls(
            code=code,
            ext_fields=_stringify(ext_fields or {}),
            body=body,
            flag=FLAG_ONEWAY if oneway else 0,
        )

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """The answer to this request: same opaque, in the serialization it was sent in."""
        return self.answer(code, remark, _stringify(ext_fields) if ext_fields else {}, body)

    def answer(
        self, code: int, remark: str | None, fields: dict[str, str], body: bytes = b""
    ) -> RemotingCommand:
        """``response`` with its fields already in their wire text: a send's answer, made for
        every send, skips the conversion pass (and keyword arguments), a twentieth of a send's
        broker CPU."""
        return RemotingCommand(
            code, LanguageCode.JAVA, CURRENT_VERSION, self.opaque, FLAG_RESPONSE, remark, fields,
            body, self.serialize_type,
        )  # fmt: skip

    def encode(self) -> bytes:
        """The whole frame.

        Raises:
            LocalProtocolError: a field does not fit the wire format.
        """
        return encode_frame_head(self) + self.body


def encode_frame_head_py(cmd: RemotingCommand) -> bytes:
    """A frame's length prefix and header: everything before its body.

    Raises:
        LocalProtocolError: a field does not fit the wire format.
    """
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = _encode_binary_header(cmd)
    else:
        header = _encode_json_header(cmd)
    if len(header) > 0xFFFFFF:
        raise LocalProtocolError(f"header of {len(header)} bytes does not fit 24 bits")
    length = 4 + len(header) + len(cmd.body)
    return _PREFIX.pack(length, (int(cmd.serialize_type) << 24) | len(header)) + header


def _stringify(fields: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in fields.items():
        if type(v) is str:  # the common case first: one check per field of every request
            out[k] = v
        elif v is None:
            continue
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        else:
            out[k] = str(v)
    return out


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, Any] = {
        "code": cmd.code,
        "language": LanguageCode.name_of(cmd.language),
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    header["serializeTypeCurrentRPC"] = "JSON"
    return orjson.dumps(header)


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    try:
        fixed = _BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)
    except struct.error as exc:
        raise LocalProtocolError(
            f"command fields out of range for the binary header: {exc}"
        ) from exc
    remark = cmd.remark.encode() if cmd.remark else b""
    parts = [fixed, _I32.pack(len(remark)), remark]
    ext = bytearray()
    for k, v in cmd.ext_fields.items():
        kb, vb = k.encode(), v.encode()
        if len(kb) > 0x7FFF:
            raise LocalProtocolError(f"ext field name of {len(kb)} bytes is too long")
        ext += _U16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb
    parts += [_I32.pack(len(ext)), bytes(ext)]
    return b"".join(parts)


# --- decoding -------------------------------------------------------------------------


def _coerce_fields(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RemoteProtocolError("extFields is not a JSON object")
    out: dict[str, str] = {}
    for k, v in raw.items():
        if v is None:
            continue
        if isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        elif isinstance(v, str):
            out[str(k)] = v
        elif isinstance(v, int | float):
            out[str(k)] = str(v)
        else:
            out[str(k)] = orjson.dumps(v).decode()
    return out


def _int_field(header: dict[str, Any], name: str, default: int | None = None) -> int:
    value = header.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise RemoteProtocolError(f"header field {name!r} is not an integer")
    try:
        return int(value)
    except ValueError as exc:
        raise RemoteProtocolError(f"header field {name!r} is not an integer") from exc


def _decode_json_header(raw: bytes) -> RemotingCommand:
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RemoteProtocolError(f"header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise RemoteProtocolError("header is not a JSON object")
    language: Any = header.get("language", "JAVA")
    if isinstance(language, str):
        language = _LANGUAGE_BY_NAME.get(language.upper(), LanguageCode.OTHER)
    elif not isinstance(language, int) or isinstance(language, bool):
        language = LanguageCode.OTHER
    remark = header.get("remark")
    return RemotingCommand(
        code=_int_field(header, "code"),
        language=int(language),
        version=_int_field(header, "version", 0),
        opaque=_int_field(header, "opaque", 0),
        flag=_int_field(header, "flag", 0),
        remark=remark if isinstance(remark, str) else None,
        ext_fields=_coerce_fields(header.get("extFields")),
        serialize_type=SerializeType.JSON,
    )


def _decode_binary_header(raw: bytes) -> RemotingCommand:
    try:
        code, language, version, opaque, flag = _BIN_FIXED.unpack_from(raw, 0)
        p = _BIN_FIXED.size
        remark_len = _I32.unpack_from(raw, p)[0]
        p += 4
        if remark_len < 0 or p + remark_len > len(raw):
            raise RemoteProtocolError(f"remark length {remark_len} overruns the header")
        remark = raw[p : p + remark_len].decode() if remark_len else None
        p += remark_len
        ext_len = _I32.unpack_from(raw, p)[0]
        p += 4
        if ext_len < 0 or p + ext_len != len(raw):
            raise RemoteProtocolError(f"ext fields length {ext_len} does not end the header")
        fields: dict[str, str] = {}
        while p < len(raw):
            klen = _U16.unpack_from(raw, p)[0]
            p += 2
            if p + klen > len(raw):
                raise RemoteProtocolError("ext field name overruns the header")
            key = raw[p : p + klen].decode()
            p += klen
            vlen = _I32.unpack_from(raw, p)[0]
            p += 4
            if vlen < 0 or p + vlen > len(raw):
                raise RemoteProtocolError("ext field overruns the header")
            fields[key] = raw[p : p + vlen].decode()
            p += vlen
        if p != len(raw):
            raise RemoteProtocolError("ext field overruns the header")
    except (struct.error, UnicodeDecodeError) as exc:
        raise RemoteProtocolError(f"malformed binary header: {exc}") from exc
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=fields,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_frame_py(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one frame without its 4-byte length prefix (serialize type, header, body).

    Raises:
        RemoteProtocolError: anything malformed.
    """
    if len(frame) < 4:
        raise RemoteProtocolError(f"frame of {len(frame)} bytes has no header length")
    mark = int.from_bytes(frame[:4], "big")
    serialize, header_len = mark >> 24, mark & 0xFFFFFF
    if header_len > len(frame) - 4:
        raise RemoteProtocolError(
            f"header length {header_len} exceeds the {len(frame) - 4} bytes of the frame"
        )
    header = bytes(frame[4 : 4 + header_len])
    if serialize == SerializeType.JSON:
        cmd = _decode_json_header(header)
    elif serialize == SerializeType.ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise RemoteProtocolError(f"unknown serialize type {serialize}")
    cmd.body = bytes(frame[4 + header_len :])
    return cmd


# Every request and response is decoded here: the extension's fast path reads the JSON headers
# RocketMQ clients send without orjson's dict and the per-field checks above.
decode_frame: Final = native.select("decode_frame", decode_frame_py)
# And every answer and request encoded here: the JSON header written without the dict orjson
# takes.
encode_frame_head: Final = native.select("encode_frame_head", encode_frame_head_py)
