"""An approval's payload: one model per kind, read back from its row by the kind column."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from hyperhive.protocol.approvals import (
    ApplyCommitPayload,
    InitConfigPayload,
    PayloadView,
    StoredPayload,
    read_payload,
)

VIEW: TypeAdapter[object] = TypeAdapter(PayloadView)


@pytest.mark.parametrize(
    "payload",
    [
        InitConfigPayload(agent="gina", config='model = "haiku"\n'),
        ApplyCommitPayload(agent="alice", commit="0" * 40, config=""),
    ],
)
def test_each_kind_round_trips_through_its_row(
    payload: InitConfigPayload | ApplyCommitPayload,
) -> None:
    stored = payload.stored()
    assert "kind" not in stored  # the row keeps it in a column of its own
    assert read_payload(payload.kind, stored) == payload
    assert VIEW.validate_python(payload.model_dump(mode="json")) == payload


def test_a_row_that_does_not_read_as_its_kind_is_kept_as_stored_with_why() -> None:
    got = read_payload("apply_commit", {"agent": "alice", "config": "", "extra": 1})
    assert isinstance(got, StoredPayload) and got.stored_kind == "apply_commit"
    assert got.problem == "commit: Field required; extra: Extra inputs are not permitted"
    assert got.stored == {"agent": "alice", "config": "", "extra": 1}
    retired = read_payload("update_meta_inputs", {"claude_version": "2.1.400"})
    assert isinstance(retired, StoredPayload)
    assert retired.problem == "this hive no longer takes update_meta_inputs requests"


def test_a_payload_is_refused_at_the_boundary_when_it_is_not_its_kinds() -> None:
    with pytest.raises(ValidationError):
        InitConfigPayload.model_validate({"agent": "gina"})
    with pytest.raises(ValidationError):
        VIEW.validate_python({"kind": "spawn_everything", "agent": "gina"})
