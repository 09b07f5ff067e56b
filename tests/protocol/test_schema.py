"""shape_of: kio field metadata read as wire shapes (kind, width, arrays, nullability, tags)."""

from __future__ import annotations

from kio.schema.api_versions.v3.response import ApiVersionsResponse, SupportedFeatureKey
from kio.schema.fetch.v12.response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.schema.produce.v3.request import ProduceRequest

from spark_log.protocol.schema import FieldShape, Kind, shape_of


def by_name(entity_type: type) -> dict[str, FieldShape]:
    shape = shape_of(entity_type)
    return {field.name: field for field in (*shape.fields, *shape.tagged.values())}


def test_untagged_fields_keep_wire_order():
    names = [field.name for field in shape_of(ProduceRequest).fields]
    assert names == ["transactional_id", "acks", "timeout", "topic_data"]


def test_kinds_widths_and_nullability():
    fields = by_name(ProduceRequest)
    assert fields["transactional_id"].kind is Kind.STRING and fields["transactional_id"].nullable
    assert (fields["acks"].kind, fields["acks"].size) == (Kind.FIXED, 2)
    assert (fields["timeout"].kind, fields["timeout"].size) == (Kind.FIXED, 4)
    assert fields["topic_data"].is_array and not fields["topic_data"].nullable


def test_records_are_nullable_bytes():
    records = by_name(PartitionData)["records"]
    assert (records.kind, records.nullable, records.is_array) == (Kind.BYTES, True, False)


def test_nested_arrays_point_at_their_entity_class():
    responses = by_name(FetchResponse)["responses"]
    assert (responses.kind, responses.is_array, responses.entity) == (
        Kind.ENTITY,
        True,
        FetchableTopicResponse,
    )


def test_tagged_fields_are_indexed_by_tag_and_kept_out_of_wire_order():
    shape = shape_of(PartitionData)
    assert sorted(shape.tagged) == [0, 1, 2]
    assert shape.tagged[0].entity is EpochEndOffset
    assert all(field.tag is None for field in shape.fields)
    assert shape.flexible and not shape_of(ProduceRequest).flexible


def test_tagged_array_of_structs():
    features = shape_of(ApiVersionsResponse).tagged[0]
    assert (features.is_array, features.entity) == (True, SupportedFeatureKey)
