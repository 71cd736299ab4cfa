"""The tests' webhook receiver (``tests/support/receiver.py``) records a POST only once its
whole body arrived: a sender killed between its headers and its body (the crash tier kills
servers mid-delivery) leaves no delivery, and the next whole POST is recorded."""

from __future__ import annotations

import socket

import httpx

from tests.support.receiver import Receiver


def test_a_post_cut_before_its_content_length_is_not_a_delivery() -> None:
    with Receiver() as receiver:
        with socket.create_connection(("127.0.0.1", receiver.port)) as sock:
            sock.sendall(
                b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n"
                b'{"jobId": "cut'
            )
            sock.shutdown(socket.SHUT_WR)
            # The receiver reads to the end of the stream, then closes without an answer.
            assert sock.recv(100) == b""
        answer = httpx.post(receiver.url(), content=b'{"jobId": "whole"}', timeout=10)
        assert answer.status_code == 200  # answered once recorded
        assert [d.job_id for d in receiver.deliveries()] == ["whole"]
