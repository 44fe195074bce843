"""io covers any filesystem, not only what the block layer sees.

slowfs is a FUSE filesystem whose every read takes 10 ms in its daemon:
a reader blocks in read() on a regular file, in_iowait is never set and no
block request is issued, as with NFS or any FUSE mount. Ground truth: cat
reads the 4 MiB file in 32 reads of 128 KiB, 32 x 10 ms = 320 ms of a
life of ~330-340 ms (exec and the dynamic loader take the rest), so at
least 85% of its lifetime is io. If trainbpf only knew the block layer,
those waits would be idle (woken by a process it does not trace).
"""
import pytest

from conftest import slowfs_mounted, trace_json


@pytest.fixture
def slowfs(tmp_path):
    with slowfs_mounted(tmp_path / "mnt", 10, 4) as mnt:
        yield mnt


def test_fuse_reads_are_io(slowfs):
    report, _ = trace_json(["sh", "-c", f"cat {slowfs}/data > /dev/null"])
    cats = [t for p in report["processes"] for t in p["threads"] if t["comm"] == "cat"]
    assert len(cats) == 1, report["processes"]
    t = cats[0]
    io = t["time_s"]["io"]
    assert io >= 0.85 * t["lifetime_s"], t["time_s"]
    assert io >= 0.30, t["time_s"]  # 32 reads of 10 ms, at least
    # The 4 MiB came from no block device (cat may load its own binary).
    assert t["io_bytes_read"] < (1 << 20), t["io_bytes_read"]
