"""The network between voters on loopback sockets: requests framed as Kafka frames with the
node's client id, answers matched by correlation id (in any order), a peer that is down costs
nothing but dropped requests and is reached again once it is up, answers raft cannot take are
dropped."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from spark_log.controller import raft_codec as rc
from spark_log.controller.quorum_channel import Address, QuorumChannel
from spark_log.protocol import ErrorCode, FrameDecoder, encode_response
from spark_log.raft.messages import Error, Message, VoteRequest, VoteResponse
from tests.cluster_process import free_ports

from .support import eventually

CLUSTER = "cluster-a"


class Peer:
    """A voter's listener that answers Vote requests: granted when the candidate's last offset
    is even; `hold` answers of a connection wait until the next request arrives (so the two
    go back in reverse order); `refuse` answers with a top-level error."""

    def __init__(self, hold: bool = False, refuse: bool = False) -> None:
        self.hold, self.refuse = hold, refuse
        self.headers: list[tuple[int, int, str]] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder, held = FrameDecoder(1 << 20), []
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                header, request = rc.read_request(frame)
                self.headers.append((header.api_key, header.header_version, header.client_id))
                answer = self._answer(request)
                held.append(encode_response(header.correlation_id, answer))
                if not self.hold or len(held) == 2:
                    for out in reversed(held):
                        writer.write(out)
                    held = []
        writer.close()

    def _answer(self, request):  # type: ignore[no-untyped-def]
        if self.refuse:
            return rc.error_response(52, 0, ErrorCode.inconsistent_cluster_id)
        inbound = rc.decode_request(request, CLUSTER)
        assert isinstance(inbound, rc.Inbound) and isinstance(inbound.body, VoteRequest)
        body = VoteResponse(Error.NONE, inbound.body.candidate_epoch, -1,
                            inbound.body.last_offset % 2 == 0)
        return rc.encode_response(body, request.__version__, lambda b: b"")


def vote(correlation: int, last_offset: int) -> Message:
    return Message(1, 2, correlation, VoteRequest(5, 1, 4, last_offset))


def test_answers_come_back_as_raft_messages_matched_by_correlation_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        peer = Peer(hold=True)
        await peer.start()
        got: list[Message] = []
        channel = QuorumChannel(1, {2: Address("127.0.0.1", peer.port)}, CLUSTER, got.append,
                                request_timeout_ms=1000)
        channel.send(vote(41, 10))
        channel.send(vote(42, 11))
        await eventually(lambda: len(got) == 2, 5, "two answers")
        assert {(m.correlation_id, m.body.vote_granted) for m in got} == {(41, True),
                                                                          (42, False)}
        assert got[0].correlation_id == 42  # the peer answered the second one first
        assert all((m.source, m.destination) == (2, 1) for m in got)
        assert peer.headers == [(52, 2, "raft-client-1")] * 2
        await channel.close()
        await peer.stop()
    asyncio.run(scenario())


def test_a_peer_that_is_down_costs_only_dropped_requests(tmp_path: Path) -> None:
    async def scenario() -> None:
        port = free_ports(1)[0]
        got: list[Message] = []
        channel = QuorumChannel(1, {2: Address("127.0.0.1", port), 3: Address("127.0.0.1", 1)},
                                CLUSTER, got.append, request_timeout_ms=500, backoff_ms=20,
                                max_backoff_ms=100)
        for i in range(5):
            channel.send(vote(i, 0))  # returns at once: nothing listens yet
        channel.send(Message(1, 9, 99, VoteRequest(5, 1, 4, 0)))  # no address: dropped
        await asyncio.sleep(0)
        assert got == []
        peer = Peer()
        await peer.start(port)
        sent = 100

        def answered() -> bool:
            nonlocal sent
            sent += 1
            channel.send(vote(sent, 0))  # raft sends again on its timeouts; so do we here
            return bool(got)
        await eventually(answered, 5, "an answer once the peer is up")
        assert got[0].correlation_id > 100
        await peer.stop()
        await channel.close()
    asyncio.run(scenario())


def test_an_answer_raft_cannot_take_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        peer = Peer(refuse=True)
        await peer.start()
        got: list[Message] = []
        channel = QuorumChannel(1, {2: Address("127.0.0.1", peer.port)}, CLUSTER, got.append,
                                request_timeout_ms=1000)
        with caplog.at_level(logging.WARNING):
            channel.send(vote(1, 0))
            await eventually(lambda: "inconsistent_cluster_id" in caplog.text, 5, "a warning")
        assert got == []
        assert await channel.drain(1.0)
        await channel.close()
        await peer.stop()
    asyncio.run(scenario())
