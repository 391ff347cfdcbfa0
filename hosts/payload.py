"""Deterministic message contents, so every transfer can be verified byte for byte.

The sender fills a message from a seed made of (source host, destination host, message
id); the receiver regenerates the same bytes and compares. Nothing but the seed has to
travel out of band, and a wrong, missing or misplaced byte anywhere fails the check.

Making or checking a message of megabytes takes milliseconds per megabyte. An agent
must not stall its event loop that long (acks would wait, and peers would take the
delay for a broken path), so both also come as generators (`build`, `check`) that do
one chunk per step; the agent runs them a step at a time between packets.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Generator

# Bytes per step. A multiple of 4: Random.randbytes() draws 32-bit words, so chunks of
# whole words give exactly the bytes one call for the whole message would.
CHUNK = 1 << 16


def message_seed(src: int, dst: int, msg_id: int) -> int:
    digest = hashlib.blake2b(f"mrc:{src}:{dst}:{msg_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def build(src: int, dst: int, msg_id: int, length: int) -> Generator[None, None, bytes]:
    """The message's bytes, made one chunk per step (the generator's return value)."""
    rng = random.Random(message_seed(src, dst, msg_id))
    parts = []
    for offset in range(0, length, CHUNK):
        parts.append(rng.randbytes(min(CHUNK, length - offset)))
        yield
    return b"".join(parts)


def check(src: int, dst: int, msg_id: int,
          data: bytes | bytearray) -> Generator[None, None, bool]:
    """Whether `data` is that message, checked one chunk per step (the return value)."""
    rng = random.Random(message_seed(src, dst, msg_id))
    for offset in range(0, len(data), CHUNK):
        end = min(len(data), offset + CHUNK)
        if data[offset:end] != rng.randbytes(end - offset):
            return False
        yield
    return True


def run(steps: Generator):
    """Run a stepwise job to its end; returns its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def message_bytes(src: int, dst: int, msg_id: int, length: int) -> bytes:
    return run(build(src, dst, msg_id, length))


def verify(src: int, dst: int, msg_id: int, data: bytes | bytearray | memoryview) -> bool:
    if isinstance(data, memoryview):
        data = data.tobytes()
    return run(check(src, dst, msg_id, data))
