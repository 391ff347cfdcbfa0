"""Deterministic message contents, so every transfer can be verified byte for byte.

The sender fills a message from a seed made of (source host, destination host, message
id); the receiver regenerates the same bytes and compares. Nothing but the seed has to
travel out of band, and a wrong, missing or misplaced byte anywhere fails the check.
"""

from __future__ import annotations

import hashlib
import random


def message_seed(src: int, dst: int, msg_id: int) -> int:
    digest = hashlib.blake2b(f"mrc:{src}:{dst}:{msg_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def message_bytes(src: int, dst: int, msg_id: int, length: int) -> bytes:
    return random.Random(message_seed(src, dst, msg_id)).randbytes(length)


def verify(src: int, dst: int, msg_id: int, data: bytes | bytearray | memoryview) -> bool:
    return bytes(data) == message_bytes(src, dst, msg_id, len(data))
