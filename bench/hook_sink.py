"""A webhook receiver for benchmarks, cheap enough not to be what is measured: its own process
(``python bench/hook_sink.py``), 127.0.0.1, an asyncio protocol that answers every POST
``204`` on a kept-alive connection and counts it; ``GET /count`` answers
``{"n": deliveries, "last": time.time() of the latest}``. It prints its port on stdout.

It checks nothing (tests verify signatures, :mod:`tests.support.receiver`); it only finds
each request's end by ``content-length``.
"""

from __future__ import annotations

import asyncio
import json
import time

STATE = {"n": 0, "last": 0.0}
_NO_CONTENT = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"


class Sink(asyncio.Protocol):
    """One connection: buffers bytes, answers each whole request."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].lower()
            size = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip() == b"content-length":
                    size = int(value)
            end = head_end + 4 + size
            if len(self.buf) < end:
                return
            self.buf = self.buf[end:]
            if head.startswith(b"get /count"):
                body = json.dumps(STATE).encode()
                self.transport.write(
                    b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
                )
            else:
                STATE["n"] += 1
                STATE["last"] = time.time()
                self.transport.write(_NO_CONTENT)


async def main() -> None:
    server = await asyncio.get_running_loop().create_server(Sink, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
