"""LoopDisk: a small filesystem of its own for one broker's log directory, that a test can fill or slow down.

A file of ``size`` bytes becomes an ext4 filesystem on a loop device, mounted at ``mount_point``:

- ``fill()`` takes every free block with a filler file (ENOSPC for the next write that needs a
  block), ``free()`` deletes it again: a full disk, as a real one fills up.
- ``throttle(write_iops, write_bps)`` slows the device down for the processes put in the disk's
  blkio cgroup (``preexec`` puts a child there before it runs): the kernel's block throttling
  (cgroup v1 blkio.throttle.*), not a sleep in our code. The filesystem is mounted ``sync`` so
  that every write reaches the device in the writer's own context, where the throttle applies;
  without it writes would wait in the page cache and a slow disk would only show on fsync.
  ``unthrottle()`` lifts the limits.

This needs root (mount, losetup, cgroups): ``missing()`` says why not when it cannot work here.
"""
from __future__ import annotations

import os
import shutil
import subprocess

BLKIO = "/sys/fs/cgroup/blkio"
FILLER = "filler"


def missing() -> str | None:
    """Why a LoopDisk cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return "a LoopDisk needs root (mount, losetup)"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control is absent)"
    return None


def throttling_missing() -> str | None:
    """Why ``throttle`` cannot work here (no cgroup v1 blkio throttling), or None."""
    if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.write_iops_device")):
        return f"no blkio throttling at {BLKIO} (cgroup v1 blkio with CONFIG_BLK_DEV_THROTTLING)"
    return None


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()


class LoopDisk:
    def __init__(self, image: str, mount_point: str, size: int, *, sync: bool = True):
        self.image = image
        self.mount_point = mount_point
        self.size = size
        self.sync = sync
        self.device: str | None = None
        self.cgroup = os.path.join(BLKIO, "kafka-compat-" + os.path.basename(os.path.dirname(image) or image)
                                   + f"-{os.getpid()}-{id(self) & 0xffff:x}")
        self._cgroup_made = False

    @property
    def filler(self) -> str:
        return os.path.join(self.mount_point, FILLER)

    def create(self) -> "LoopDisk":
        why = missing()
        if why:
            raise RuntimeError(why)
        os.makedirs(self.mount_point, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size)
        # no blocks reserved for root (the broker runs as whoever runs the test, root here), no journal:
        # a small test filesystem that fills exactly when its blocks are gone
        _run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", self.image)
        self.device = _run("losetup", "--find", "--show", self.image)
        try:
            _run("mount", "-o", "sync" if self.sync else "defaults", self.device, self.mount_point)
        except RuntimeError:
            self._detach()
            raise
        return self

    # -- full disk
    def fill(self) -> int:
        """Take every free block; returns the bytes taken."""
        taken = 0
        with open(self.filler, "ab") as f:
            block = b"\0" * (1 << 20)
            while True:
                try:
                    free = os.statvfs(self.mount_point).f_bavail * os.statvfs(self.mount_point).f_frsize
                    if free <= 0:
                        break
                    n = os.write(f.fileno(), block[:min(len(block), free)])
                    if n <= 0:
                        break
                    taken += n
                except OSError:       # ENOSPC: full
                    break
            try:
                os.fsync(f.fileno())
            except OSError:
                pass
        return taken

    def free(self) -> None:
        try:
            os.unlink(self.filler)
        except FileNotFoundError:
            pass

    @property
    def free_bytes(self) -> int:
        st = os.statvfs(self.mount_point)
        return st.f_bavail * st.f_frsize

    # -- slow disk
    def _device_numbers(self) -> str:
        st = os.stat(self.device)
        return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"

    def _ensure_cgroup(self) -> None:
        why = throttling_missing()
        if why:
            raise RuntimeError(why)
        if not self._cgroup_made:
            os.makedirs(self.cgroup, exist_ok=True)
            self._cgroup_made = True

    def preexec(self) -> None:
        """For subprocess's preexec_fn: run the child in this disk's cgroup (made on first use)."""
        with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def prepare_throttling(self) -> bool:
        """Make the cgroup that ``preexec`` joins; False (nothing made) where throttling is missing."""
        if throttling_missing():
            return False
        self._ensure_cgroup()
        return True

    def throttle(self, write_iops: int | None = 20, write_bps: int | None = None,
                 read_iops: int | None = None) -> None:
        """Limit this disk for the processes of its cgroup (0 or None: no limit of that kind)."""
        self._ensure_cgroup()
        dev = self._device_numbers()
        for name, value in (("write_iops", write_iops), ("write_bps", write_bps), ("read_iops", read_iops)):
            with open(os.path.join(self.cgroup, f"blkio.throttle.{name}_device"), "w") as f:
                f.write(f"{dev} {int(value or 0)}")

    def writes(self) -> int:
        """Writes this disk's cgroup has sent to the device (through the throttling layer) so far."""
        if not self._cgroup_made or not self.device:
            return 0
        dev = self._device_numbers()
        with open(os.path.join(self.cgroup, "blkio.throttle.io_serviced")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == dev and parts[1] == "Write":
                    return int(parts[2])
        return 0

    def unthrottle(self) -> None:
        if self._cgroup_made and self.device:
            self.throttle(0, 0, 0)

    # -- teardown
    def _detach(self) -> None:
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=60)
            self.device = None

    def close(self) -> None:
        """Unmount and release the device and cgroup (call once the processes using them have exited)."""
        if self.device:
            self.unthrottle()
            subprocess.run(["umount", self.mount_point], capture_output=True, timeout=60)
            self._detach()
        if self._cgroup_made:
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass
            self._cgroup_made = False
        try:
            os.unlink(self.image)
        except FileNotFoundError:
            pass
