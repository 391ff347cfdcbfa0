"""Deterministic message contents, so every transfer can be verified byte for byte.

The sender fills a message from a seed made of (source host, destination host, message
id); the receiver regenerates the same bytes and compares. Nothing but the seed has to
travel out of band, and a wrong, missing or misplaced byte anywhere fails the check.

The bytes are made in chunks of BLOCK bytes from one random block per message (BLOCK
random bytes drawn from the seed, or as many as the message has if it is shorter):
chunk i is that block rotated by a random amount r_i, also drawn from the seed.
Making a chunk is a copy, not a draw from the random generator (a draw costs about 2
ms a megabyte: as much CPU as the transport itself at a 1,200-byte MTU); checking one
is the same copy and a compare. Every byte still depends on the seed and its
position: a byte moved by d within a chunk meets another byte of the random block,
and a packet moved to another chunk escapes the check only if its rotation differs by
exactly the move (one chance in BLOCK per packet, and BLOCK is a prime, so no MTU
lines chunks up with each other).

An agent must not stall its event loop for a whole large message (acks would wait,
and peers would take the delay for a broken path), so both also come as generators
(`build`, `check`) that do one chunk per step; the agent runs them a step at a time
between packets. For the same reason a message's buffer (`zeroed`) is memory the
kernel hands out a page at a time as it is written: `bytearray(n)` zeroes all of it at
once, 80 ms for a 126 MB message, long enough for a peer's first timeout to fire.
"""

from __future__ import annotations

import hashlib
import mmap
import random
from collections.abc import Generator

# Bytes per chunk and per step: a prime, so that chunks never line up with packets.
BLOCK = 65521
CHUNK = BLOCK
# Buffers at least this large are mapped (`zeroed`); smaller ones are plain bytearrays.
MAPPED_BYTES = 1 << 20
MessageData = bytearray | mmap.mmap  # a message's bytes, as `zeroed` makes them


def zeroed(length: int) -> MessageData:
    """A writable buffer of `length` zero bytes that costs nothing until it is written:
    anonymous memory, zeroed by the kernel one page at a time on first touch (a
    bytearray of the size zeroes it all at once). Small buffers are bytearrays."""
    return mmap.mmap(-1, length) if length >= MAPPED_BYTES else bytearray(length)


def message_seed(src: int, dst: int, msg_id: int) -> int:
    digest = hashlib.blake2b(f"mrc:{src}:{dst}:{msg_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _rotations(src: int, dst: int, msg_id: int,
               length: int) -> Generator[tuple[int, bytes, int], None, None]:
    """(offset, random block, rotation) of each chunk of the message, in order. The
    block is BLOCK bytes, or the message's length if shorter: a ring's steps of a few
    kilobytes each drew 64 KB of random bytes, a fifth of their agents' CPU."""
    rng = random.Random(message_seed(src, dst, msg_id))
    size = max(1, min(BLOCK, length))
    block = rng.randbytes(size)
    for offset in range(0, length, size):
        yield offset, block, rng.randrange(size)


def build(src: int, dst: int, msg_id: int,
          length: int) -> Generator[None, None, MessageData]:
    """The message's bytes, made one chunk per step (the generator's return value)."""
    data = zeroed(length)
    for offset, block, turn in _rotations(src, dst, msg_id, length):
        # The chunk is block[turn:] + block[:turn], cut at the end of the message.
        head = min(len(block) - turn, length - offset)
        data[offset:offset + head] = block[turn:turn + head]
        tail = min(turn, length - offset - head)
        if tail > 0:
            data[offset + head:offset + head + tail] = block[:tail]
        yield
    return data


def check(src: int, dst: int, msg_id: int,
          data: bytes | bytearray) -> Generator[None, None, bool]:
    """Whether `data` is that message, checked one chunk per step (the return value)."""
    length = len(data)
    for offset, block, turn in _rotations(src, dst, msg_id, length):
        head = min(len(block) - turn, length - offset)
        if data[offset:offset + head] != block[turn:turn + head]:
            return False
        tail = min(turn, length - offset - head)
        if tail > 0 and data[offset + head:offset + head + tail] != block[:tail]:
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


def message_bytes(src: int, dst: int, msg_id: int, length: int) -> MessageData:
    return run(build(src, dst, msg_id, length))


def verify(src: int, dst: int, msg_id: int, data: bytes | bytearray | memoryview) -> bool:
    if isinstance(data, memoryview):
        data = data.tobytes()
    return run(check(src, dst, msg_id, data))
