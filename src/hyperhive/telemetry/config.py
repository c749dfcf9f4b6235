"""``[telemetry]`` in ``hive.toml``: where traces go (nowhere unless told)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["TelemetryConfig"]


class TelemetryConfig(BaseModel):
    """``[telemetry]``: an OTLP/HTTP collector for the hive's traces."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    otlp_endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces; unset: no traces.",
    )
    service_name: str = Field(
        default="hyperhive", min_length=1, description="The service name of exported spans."
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(
                "otlp_endpoint must be an http(s):// URL of an OTLP/HTTP traces receiver, "
                "e.g. http://127.0.0.1:4318/v1/traces"
            )
        return v or None
