"""The tick log's channels: protobuf schemas derived from :class:`TickRecord`'s field declarations.

Each TickRecord field names its channel (``field(metadata=tick_record.logged(channel))``); this module turns
those declarations into one protobuf message per channel (``robot_grpo.ticklog.RobotState``, ``Verdict``,
``Proposal``, ``Command``, ``Timing``), every one led by ``tick`` so a plot of any channel can be lined up with
the others, plus the state machine's ``Transition`` channel. Types follow the annotations: float -> double,
int -> int64, bool -> bool, str -> string, tuple[str, ...] -> repeated string, an array -> repeated double or float (its
declared dtype, kept exactly). Protobuf holds NaN and inf as they are, so a held tick's NaN latency and a policy's
NaN action read back bit for bit.

A log file carries its own schemas; a reader decodes with the schemas of the file, by field name, so a log written
before a field existed reads with the field's default, and fields it does not know are ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from deploy.runtime.tick_record import (
    COMMAND,
    PROPOSAL,
    STATE,
    TICK_CHANNELS,
    TIMING,
    VERDICT,
    TickRecord,
    check_policy_id,
)

PROTO_PACKAGE = "robot_grpo.ticklog"
SCHEMA_ENCODING = "protobuf"  # MCAP schema encoding: a binary FileDescriptorSet
MESSAGE_ENCODING = "protobuf"
TRANSITIONS = "/transitions"  # the state machine's transitions: tick, source, target, reason
MESSAGE_NAMES = {
    STATE: "RobotState",
    VERDICT: "Verdict",
    PROPOSAL: "Proposal",
    COMMAND: "Command",
    TIMING: "Timing",
    TRANSITIONS: "Transition",
}
KEY_FIELD = "tick"  # leads every message
_F = descriptor_pb2.FieldDescriptorProto
_SCALAR_TYPES = {"float": _F.TYPE_DOUBLE, "int": _F.TYPE_INT64, "bool": _F.TYPE_BOOL, "str": _F.TYPE_STRING}
_ARRAY_TYPES = {np.dtype(np.float64): _F.TYPE_DOUBLE, np.dtype(np.float32): _F.TYPE_FLOAT}
_STRINGS = "tuple[str, ...]"
_ARRAY = "np.ndarray"


class TickSchemaError(ValueError):
    """A TickRecord field the tick log cannot describe (a bug in a field declaration, found at import)."""


@dataclass(frozen=True)
class LoggedField:
    """One TickRecord field as the log sees it: its name, channel, annotation and array dtype."""

    name: str
    channel: str
    annotation: str
    dtype: np.dtype | None

    def proto_field(self, number: int) -> descriptor_pb2.FieldDescriptorProto:
        if self.annotation == _ARRAY:
            if self.dtype not in _ARRAY_TYPES:
                raise TickSchemaError(f"TickRecord.{self.name}: array dtype {self.dtype} is not float64 or float32")
            return _F(name=self.name, number=number, type=_ARRAY_TYPES[self.dtype], label=_F.LABEL_REPEATED)
        if self.annotation == _STRINGS:
            return _F(name=self.name, number=number, type=_F.TYPE_STRING, label=_F.LABEL_REPEATED)
        if self.annotation not in _SCALAR_TYPES:
            raise TickSchemaError(
                f"TickRecord.{self.name}: the tick log has no type for {self.annotation!r}; use float, int, bool, "
                "str, tuple[str, ...] or np.ndarray"
            )
        return _F(name=self.name, number=number, type=_SCALAR_TYPES[self.annotation], label=_F.LABEL_OPTIONAL)

    def to_proto(self) -> Callable[[Any], Any]:
        """Converts the record's value to what the protobuf field takes."""
        if self.annotation == _ARRAY:
            dtype = self.dtype
            return lambda v: np.asarray(v, dtype=dtype).reshape(-1).tolist()
        if self.annotation == _STRINGS:
            return list
        if self.name == "policy_id":
            return check_policy_id
        return {"float": float, "int": int, "bool": bool, "str": str}[self.annotation]

    def from_proto(self, value: Any) -> Any:
        """Converts a decoded protobuf value back to the record's type."""
        if self.annotation == _ARRAY:
            return np.asarray(value, dtype=self.dtype)
        if self.annotation == _STRINGS:
            return tuple(value)
        return value


def logged_fields(record_class: type = TickRecord) -> tuple[LoggedField, ...]:
    """Every field of the record class with its channel; a field declared without one is refused, naming it."""
    out = []
    for f in dataclasses.fields(record_class):
        channel = f.metadata.get("channel")
        if channel not in TICK_CHANNELS:
            raise TickSchemaError(
                f"TickRecord.{f.name} names no tick log channel; declare it with field(metadata=logged(channel)) in "
                "tick_record.py"
            )
        dtype = f.metadata.get("dtype")
        out.append(LoggedField(f.name, channel, str(f.type), np.dtype(dtype) if dtype is not None else None))
    return tuple(out)


def _file_descriptor_set(topic: str, fields: list[descriptor_pb2.FieldDescriptorProto]) -> bytes:
    name = MESSAGE_NAMES[topic]
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"robot_grpo/ticklog/{name}.proto", package=PROTO_PACKAGE, syntax="proto3"
    )
    proto.message_type.add(name=name).field.extend(fields)
    return descriptor_pb2.FileDescriptorSet(file=[proto]).SerializeToString()


@dataclass(frozen=True)
class ChannelSchema:
    """One channel: its topic, protobuf message name and FileDescriptorSet, and the record fields it carries."""

    topic: str
    schema_name: str
    schema_data: bytes
    fields: tuple[LoggedField, ...]


def _tick_schemas() -> tuple[ChannelSchema, ...]:
    fields = logged_fields()
    if KEY_FIELD not in {f.name for f in fields}:
        raise TickSchemaError(f"TickRecord has no {KEY_FIELD!r} field, which leads every channel's message")
    key = next(f for f in fields if f.name == KEY_FIELD)
    schemas = []
    for topic in TICK_CHANNELS:
        own = [f for f in fields if f.channel == topic and f.name != KEY_FIELD]
        protos = [key.proto_field(1)] + [f.proto_field(i) for i, f in enumerate(own, start=2)]
        name = f"{PROTO_PACKAGE}.{MESSAGE_NAMES[topic]}"
        schemas.append(ChannelSchema(topic, name, _file_descriptor_set(topic, protos), (key, *own)))
    return tuple(schemas)


def _transition_schema() -> ChannelSchema:
    parts = [
        ("tick", _F.TYPE_INT64),
        ("source", _F.TYPE_STRING),
        ("target", _F.TYPE_STRING),
        ("reason", _F.TYPE_STRING),
    ]
    protos = [_F(name=n, number=i, type=t, label=_F.LABEL_OPTIONAL) for i, (n, t) in enumerate(parts, start=1)]
    name = f"{PROTO_PACKAGE}.{MESSAGE_NAMES[TRANSITIONS]}"
    return ChannelSchema(TRANSITIONS, name, _file_descriptor_set(TRANSITIONS, protos), ())


TICK_SCHEMAS = _tick_schemas()
TRANSITION_SCHEMA = _transition_schema()
ALL_SCHEMAS = (*TICK_SCHEMAS, TRANSITION_SCHEMA)


def message_class(schema_name: str, schema_data: bytes) -> type[Message]:
    """The protobuf message class of a schema as a log file stores it (name + FileDescriptorSet)."""
    pool = descriptor_pool.DescriptorPool()
    try:
        for file in descriptor_pb2.FileDescriptorSet.FromString(schema_data).file:
            pool.Add(file)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema_name))
    except (DecodeError, KeyError, TypeError) as err:
        raise ValueError(f"schema {schema_name!r} is not a protobuf FileDescriptorSet holding it: {err}") from None


@dataclass(frozen=True)
class LoggedTransition:
    """A state machine transition as the log holds it: at ``tick`` (loop time ``t_s``, seconds), source -> target."""

    tick: int
    source: str
    target: str
    reason: str
    t_s: float


class TickEncoder:
    """Encodes a TickRecord into one protobuf message per tick channel (in ``TICK_SCHEMAS`` order)."""

    def __init__(self) -> None:
        self._plans = [
            (message_class(s.schema_name, s.schema_data), [(f.name, f.to_proto()) for f in s.fields])
            for s in TICK_SCHEMAS
        ]
        self._transition = message_class(TRANSITION_SCHEMA.schema_name, TRANSITION_SCHEMA.schema_data)

    def encode(self, record: TickRecord) -> list[bytes]:
        """The payload of each channel; raises ValueError on a value the schema cannot hold."""
        out = []
        for cls, plan in self._plans:
            try:
                message = cls(**{name: convert(getattr(record, name)) for name, convert in plan})
            except (TypeError, OverflowError) as err:
                raise ValueError(f"tick {record.tick}: a field does not fit the tick log's schema: {err}") from None
            out.append(message.SerializeToString())
        return out

    def encode_transition(self, tick: int, source: str, target: str, reason: str) -> bytes:
        return self._transition(tick=tick, source=source, target=target, reason=reason).SerializeToString()


class TickDecoder:
    """Decodes the messages of one log file with that file's schemas (by field name, see the module docstring)."""

    def __init__(self) -> None:
        self._classes: dict[tuple[str, bytes], type[Message]] = {}
        self._known = {f.name: f for f in logged_fields()}
        self.unknown_fields: set[str] = set()  # fields a newer writer logged that this TickRecord does not have

    def fields(self, schema_name: str, schema_data: bytes, payload: bytes) -> dict[str, Any]:
        """The message's fields by name, as the file's schema says; raises ValueError on a payload it cannot read."""
        key = (schema_name, schema_data)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = message_class(schema_name, schema_data)
        try:
            message = cls.FromString(payload)
        except DecodeError as err:
            raise ValueError(f"a {schema_name} message does not decode: {err}") from None
        return {f.name: getattr(message, f.name) for f in message.DESCRIPTOR.fields}

    def record(self, parts: Mapping[str, Any]) -> TickRecord:
        """A TickRecord from the merged fields of one tick's messages; missing fields take their defaults."""
        values = {}
        for name, value in parts.items():
            known = self._known.get(name)
            if known is None:
                self.unknown_fields.add(name)
                continue
            values[name] = known.from_proto(value)
        try:
            return TickRecord(**values)
        except TypeError as err:
            raise ValueError(f"a tick in the log lacks a field this build needs: {err}") from None
