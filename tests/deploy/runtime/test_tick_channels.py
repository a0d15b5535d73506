"""The tick log's channel schemas are derived from TickRecord's declarations; old and newer logs still read."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from deploy.runtime.tick_channels import (
    KEY_FIELD,
    TICK_SCHEMAS,
    TickDecoder,
    TickEncoder,
    TickSchemaError,
    logged_fields,
    message_class,
)
from deploy.runtime.tick_record import STATE, TICK_CHANNELS, TickRecord, logged


def test_every_record_field_is_on_exactly_one_channel_and_tick_leads_every_message():
    names = [f.name for f in dataclasses.fields(TickRecord)]
    on_channels = [f.name for s in TICK_SCHEMAS for f in s.fields if f.name != KEY_FIELD]
    assert sorted([*on_channels, KEY_FIELD]) == sorted(names)
    assert [s.topic for s in TICK_SCHEMAS] == list(TICK_CHANNELS)
    for schema in TICK_SCHEMAS:
        descriptor = message_class(schema.schema_name, schema.schema_data).DESCRIPTOR
        assert descriptor.fields[0].name == KEY_FIELD and descriptor.fields[0].number == 1
        assert [f.name for f in descriptor.fields] == [f.name for f in schema.fields]


def test_a_field_declared_without_a_channel_is_refused_naming_it():
    @dataclasses.dataclass
    class WithAPlainField:
        tick: int = dataclasses.field(metadata=logged(STATE))
        newcomer: float = 0.0

    with pytest.raises(TickSchemaError, match=r"newcomer names no tick log channel; declare it with field\(metadata="):
        logged_fields(WithAPlainField)


def test_a_field_of_a_type_the_log_has_no_schema_for_is_refused():
    @dataclasses.dataclass
    class WithAMapping:
        tick: int = dataclasses.field(metadata=logged(STATE))
        table: dict = dataclasses.field(default_factory=dict, metadata=logged(STATE))

    [_, table] = logged_fields(WithAMapping)
    with pytest.raises(TickSchemaError, match="no type for 'dict'"):
        table.proto_field(2)
    with pytest.raises(ValueError, match="not a tick log channel"):
        logged("/elsewhere")


def record() -> TickRecord:
    return TickRecord(
        0.5, 3, np.ones(10), np.ones(24, np.float32), np.ones(3), np.ones(4), np.ones(4), ("clip",), 1e-4, 0.0
    )


def test_a_log_without_a_newer_field_reads_with_its_default_and_unknown_fields_are_ignored():
    decoder = TickDecoder()
    parts = {}
    for schema, payload in zip(TICK_SCHEMAS, TickEncoder().encode(record()), strict=True):
        parts.update(decoder.fields(schema.schema_name, schema.schema_data, payload))
    older = {k: v for k, v in parts.items() if k not in ("verdict", "bound_low")}  # written before they existed
    back = decoder.record({**older, "from_the_future": 1.0})
    assert back.verdict == "" and back.bound_low.size == 0 and back.tick == 3
    assert decoder.unknown_fields == {"from_the_future"}
    with pytest.raises(ValueError, match="lacks a field"):
        decoder.record({k: v for k, v in parts.items() if k != "state"})  # state has no default


def test_a_payload_that_does_not_decode_is_refused():
    schema = TICK_SCHEMAS[0]
    with pytest.raises(ValueError, match="does not decode"):
        TickDecoder().fields(schema.schema_name, schema.schema_data, b"\xff\xff\xff")
    with pytest.raises(ValueError, match="FileDescriptorSet"):
        message_class("robot_grpo.ticklog.Nope", schema.schema_data)
