"""A TCP fault proxy on loopback: forwards bytes to a target and, on demand, adds latency,
stalls connections (the bytes stop, the socket stays open: a half-open peer) or resets
them (RST). It runs its own asyncio loop in a thread, so blocking code under test can
talk through it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["pass", "stall", "reset"]
CHUNK = 64 * 1024


@dataclass(eq=False)
class _Conn:
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    stalled: bool = False


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST, not FIN: a linger time of 0 drops the unsent bytes."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.mode: Mode = "pass"  # for new connections
        self.latency = 0.0  # seconds added before each forwarded chunk
        self.accepted = 0
        self._conns: set[_Conn] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self.port = 0

    # --- control, from any thread ---------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def stop(self) -> None:
        async def shut() -> None:
            self._reset_all()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def reset_all(self) -> None:
        """RST every open connection, both sides."""
        self._call(self._reset_all)

    def stall_all(self) -> None:
        """Stop forwarding on every open connection, leaving the sockets open."""
        self._call(self._stall_all)

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def _call(self, fn: object) -> None:
        async def run() -> None:
            fn()  # type: ignore[operator]

        asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def _reset_all(self) -> None:
        for conn in list(self._conns):
            for w in conn.writers:
                _reset(w)
        self._conns.clear()

    def _stall_all(self) -> None:
        for conn in self._conns:
            conn.stalled = True

    # --- the loop ---------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._reset_all()
            self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        conn = _Conn([writer])
        self._conns.add(conn)
        try:
            if self.mode == "reset":
                _reset(writer)
                return
            if self.mode == "stall":
                conn.stalled = True
                while await reader.read(CHUNK):  # read and drop: the peer never hears back
                    pass
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _reset(writer)
                return
            conn.writers.append(up_writer)
            await asyncio.gather(
                self._pipe(reader, up_writer, conn), self._pipe(up_reader, writer, conn)
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.discard(conn)
            for w in conn.writers:
                w.close()

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, conn: _Conn
    ) -> None:
        try:
            while data := await src.read(CHUNK):
                if self.latency:
                    await asyncio.sleep(self.latency)
                if conn.stalled:
                    continue  # swallowed: the sender thinks it went out
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            if not conn.stalled:
                with contextlib.suppress(OSError):
                    dst.write_eof()
