"""The wires between the sandboxed candidate, its trusted driver process and the parent.

Whatever a trusted process reads from a less trusted one is a length-prefixed JSON frame. JSON,
not pickle, because a trusted process must never run code chosen by the candidate: unpickling a
hostile stream executes arbitrary callables. Calls, answers and solutions (lists, tuples, numbers,
numeric numpy arrays) are encoded into a tagged JSON form that decodes to plain data and nothing
else. Nothing a frame says about time is read: the driver times each frame's arrival itself.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from tasks.plain_data import NUMERIC_KINDS

MAX_FRAME_BYTES = 16 << 20
MAX_DEPTH = 32
"""Deepest nesting a solution may have: the decoder recurses, and a hostile frame must not
exhaust the trusted parent's stack."""
_HEADER = struct.Struct("<I")
MAX_FORK_BATCH = 16
"""Most children one fork request asks for (two descriptors each, in one SCM_RIGHTS message)."""
STATUS_RECORD = struct.Struct("<cq")
"""Fork-server status records: (b"P", pid) right after the fork, (b"X", wait status) after reaping."""


class ChannelError(Exception):
    """The child wrote something that is not a well-formed frame."""


def _json_encoder() -> Callable[[Any], str]:
    """One reusable JSON encoder, built where the module is imported (in the fork server).

    ``json.dumps`` builds an encoder per call through three Python layers; in a freshly forked
    child that costs some thirty copied pages over a candidate's few messages. The messages are
    fresh dicts of plain data (``encode_solution``), so no circular-reference check is needed.
    """
    make = json.encoder.c_make_encoder
    if make is None:  # a Python without the _json accelerator
        return json.JSONEncoder(allow_nan=True, separators=(",", ":")).encode
    fallback = json.JSONEncoder().default  # raises TypeError, as json.dumps does
    encode = make(None, fallback, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    return lambda message: "".join(encode(message, 0))


_encode = _json_encoder()


def frame(message: dict[str, Any]) -> bytes:
    """One message as a length-prefixed frame."""
    payload = _encode(message).encode()
    return _HEADER.pack(len(payload)) + payload


def read_frame(fd: int) -> dict[str, Any]:
    """The next message from a trusted writer on ``fd`` (blocking); EOFError when it has closed."""
    (size,) = _HEADER.unpack(read_exactly(fd, _HEADER.size))
    return json.loads(read_exactly(fd, size))


def read_exactly(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the channel closed in the middle of a message")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """Reassembles frames from the byte chunks a non-blocking pipe delivers."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buffer += chunk
        messages = []
        while len(self._buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer)
            if size > MAX_FRAME_BYTES:
                raise ChannelError(f"the child sent a {size}-byte frame (limit {MAX_FRAME_BYTES})")
            if len(self._buffer) < _HEADER.size + size:
                break
            payload = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
            del self._buffer[: _HEADER.size + size]
            try:
                message = json.loads(payload)
            except (ValueError, RecursionError) as error:
                raise ChannelError(f"the child sent a malformed frame: {type(error).__name__}: {str(error)[:200]}") from None
            if not isinstance(message, dict):
                raise ChannelError("the child sent a frame that is not an object")
            messages.append(message)
        return messages


def decode_solution(value: Any, depth: int = 0) -> Any:
    """Inverse of encode_solution; raises ChannelError on anything it did not produce."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if depth >= MAX_DEPTH:
        raise ChannelError(f"the child sent a solution nested deeper than {MAX_DEPTH} levels")
    if type(value) is list:
        return [decode_solution(item, depth + 1) for item in value]
    if type(value) is dict and len(value) == 1:
        ((tag, body),) = value.items()
        try:
            if tag == "float" and type(body) is str:
                return float(body)
            if tag == "tuple" and type(body) is list:
                return tuple(decode_solution(item, depth + 1) for item in body)
            if tag == "dict" and type(body) is list:
                return {str(key): decode_solution(item, depth + 1) for key, item in body}
            if tag == "ndarray" and type(body) is list:
                dtype, shape, data = np.dtype(body[0]), tuple(int(n) for n in body[1]), base64.b64decode(body[2])
                if dtype.kind in NUMERIC_KINDS and dtype.fields is None and not dtype.subdtype:
                    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        except (TypeError, ValueError, IndexError, OverflowError, MemoryError) as error:
            raise ChannelError(f"the child sent a malformed {tag}: {type(error).__name__}: {str(error)[:200]}") from None
    raise ChannelError(f"the child sent an unknown value {str(value)[:60]}")
