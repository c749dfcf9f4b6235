"""JSON-lines framing with a size cap.

Pure module: no I/O. ``FrameDecoder`` turns arbitrary byte chunks into whole
lines; a line longer than the cap is skipped up to its newline and reported
once as ``FrameTooLarge``, so one bad frame never desynchronises the stream
or costs more memory than the cap.
"""

from __future__ import annotations

from hyperhive.errors import FrameTooLarge

__all__ = ["DEFAULT_MAX_FRAME", "FrameDecoder"]

DEFAULT_MAX_FRAME = 1 << 20


class FrameDecoder:
    """Incremental splitter of ``\\n``-terminated frames."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes | FrameTooLarge]:
        """Add bytes; return the complete frames (and oversize markers) they finish."""
        if (
            not self._buf
            and not self._discarding
            and data.find(b"\n") == len(data) - 1
            and len(data) <= self.max_frame
        ):
            # The common chunk: exactly one whole frame (one request, one write).
            frame = data[:-1].rstrip(b"\r")
            return [frame] if frame.strip() else []
        out: list[bytes | FrameTooLarge] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            chunk = data[start:nl]
            start = nl + 1
            if self._discarding:
                self._discarding = False
                continue
            if len(self._buf) + len(chunk) > self.max_frame:
                self._buf.clear()
                out.append(self._too_large())
                continue
            self._buf.extend(chunk)
            frame = bytes(self._buf).rstrip(b"\r")
            self._buf.clear()
            if frame.strip():
                out.append(frame)
        rest = data[start:]
        if self._discarding:
            return out
        if len(self._buf) + len(rest) > self.max_frame:
            self._buf.clear()
            self._discarding = True
            out.append(self._too_large())
        else:
            self._buf.extend(rest)
        return out

    @property
    def pending(self) -> int:
        """Bytes buffered toward an unfinished frame."""
        return len(self._buf)

    def _too_large(self) -> FrameTooLarge:
        return FrameTooLarge(
            f"frame exceeds the {self.max_frame}-byte limit and was dropped; "
            "send smaller requests (large payloads belong in files)"
        )
