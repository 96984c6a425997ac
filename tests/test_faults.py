"""The fault tools EmbeddedCluster uses, on their own: a LinkProxy link forwards, goes silent when
blackholed (holding the bytes, not losing them), resets connections when cut in reset mode, and forwards
again once healed; a LoopDisk fills up (ENOSPC) and frees, and its throttling really slows the writes
that reach the device (the kernel's blkio counters show them)."""
from __future__ import annotations

import errno
import os
import socket
import socketserver
import threading

import pytest

from kafka_compat.faults import disk
from kafka_compat.faults.proxy import LinkProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo_link():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = LinkProxy()
    port = proxy.add("a->b", server.server_address[1])
    yield proxy, port
    proxy.close()
    server.shutdown()
    server.server_close()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def _echo(s: socket.socket, data: bytes) -> bytes:
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_a_link_forwards_then_a_blackhole_holds_the_bytes_until_healed(echo_link):
    proxy, port = echo_link
    s = _connect(port)
    assert _echo(s, b"before") == b"before"
    proxy.cut("a->b", "blackhole")
    assert proxy.is_cut("a->b")
    s.sendall(b"during")
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.recv(100)                                  # nothing comes back through the cut
    proxy.heal("a->b")
    s.settimeout(10)
    got = b""
    while len(got) < 6:
        got += s.recv(100)
    assert got == b"during"                          # held, not lost: the stream is whole
    s.close()


def test_a_reset_cut_resets_open_and_new_connections_and_heal_lets_them_in(echo_link):
    proxy, port = echo_link
    s = _connect(port)
    assert _echo(s, b"x") == b"x"
    proxy.cut("a->b", "reset")
    with pytest.raises(OSError):                     # reset, or closed under us
        s.sendall(b"y" * 100000)
        if not s.recv(100):
            raise ConnectionResetError
    s.close()
    with pytest.raises(OSError):                     # reset at once, or as soon as it is used
        t = _connect(port)
        try:
            t.sendall(b"z")
            if not t.recv(100):
                raise ConnectionResetError
        finally:
            t.close()
    proxy.heal("a->b")
    u = _connect(port)
    assert _echo(u, b"again") == b"again"
    u.close()


needs_disk = pytest.mark.skipif(disk.missing() is not None, reason=str(disk.missing()))


@pytest.fixture
def small_disk(tmp_path):
    d = disk.LoopDisk(str(tmp_path / "disk.img"), str(tmp_path / "mnt"), 8 << 20).create()
    yield d
    d.close()


@needs_disk
def test_a_filled_disk_refuses_writes_until_freed(small_disk):
    assert small_disk.fill() > 4 << 20
    path = os.path.join(small_disk.mount_point, "f")
    with pytest.raises(OSError) as e:
        with open(path, "wb") as f:
            f.write(b"x" * (1 << 20))
            f.flush()
            os.fsync(f.fileno())
    assert e.value.errno == errno.ENOSPC
    small_disk.free()
    with open(path, "wb") as f:
        f.write(b"x" * (1 << 20))
    assert os.path.getsize(path) == 1 << 20


@needs_disk
@pytest.mark.skipif(disk.throttling_missing() is not None, reason=str(disk.throttling_missing()))
def test_a_throttled_disk_counts_the_writes_of_its_cgroup(small_disk):
    """A child in the disk's cgroup writes through the throttle; the cgroup's device counters see it."""
    import subprocess
    import sys
    assert small_disk.prepare_throttling()
    small_disk.throttle(write_iops=50)
    before = small_disk.writes()
    code = ("import os\nfd = os.open(%r, os.O_WRONLY | os.O_CREAT)\n"
            "for i in range(20):\n    os.pwrite(fd, b'x' * 4096, i * 4096)\n    os.fsync(fd)\n") % \
        os.path.join(small_disk.mount_point, "slow")
    done = subprocess.run([sys.executable, "-c", code], preexec_fn=small_disk.preexec, timeout=120)
    assert done.returncode == 0
    assert small_disk.writes() - before >= 20
    small_disk.unthrottle()
