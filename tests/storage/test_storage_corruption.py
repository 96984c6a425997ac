"""The corruption campaign, bounded for CI: 100 damaged log dirs loaded in-process through LogManager.

Each case damages one file of a cleanly closed log dir (segment bytes, truncation, indexes, time
and transaction indexes, producer snapshots, the leader-epoch checkpoint, every per-dir
checkpoint, the clean-shutdown marker), with or without the marker, and checks that loading
never fails, that nothing invalid is served, that derived files come back from the log and that
log damage truncates no lower than the damage (corruption.py says exactly what is checked).
The full run is ``python tests/storage/corruption.py --corruptions 1000``; the real broker's side
(meta.properties, replication-offset-checkpoint, a real consumer) is tests/test_corruption.py.
"""

import corruption


def test_a_hundred_corruptions_load_and_serve_nothing_invalid():
    result = corruption.campaign(100, seed=20)
    assert result["failures"] == [], "\n".join(f"{case}: {problems}" for case, problems in result["failures"])
    # the campaign reached every kind of file, and found damage to notice
    kinds = set(result["by_file"])
    assert {"log", "index", "timeindex", "snapshot", "leader-epoch-checkpoint", "kafka_cleanshutdown",
            "recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"} <= kinds
    assert result["with_warnings"] > 10 and result["log_truncated"] > 0


def test_an_index_entry_pointing_off_a_batch_is_not_followed(tmp_path):
    """A damaged index that a clean shutdown vouches for: the read scans rather than serve garbage."""
    import random

    from kafka_compat.storage.fetch_data_info import FetchIsolation

    directory = str(tmp_path / "d")
    corruption.write_pristine(directory, random.Random(1))
    index = sorted(p for p in (tmp_path / "d" / "plain-0").iterdir() if p.suffix == ".index")[0]
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    data[12:16] = (int.from_bytes(data[12:16], "big") + 3).to_bytes(4, "big")   # entry 1 now points mid-batch
    index.write_bytes(bytes(data))
    m = corruption.manager(directory)
    m.startup(background=False)
    try:
        lg = m.get_log("plain", 0)
        target = int.from_bytes(data[8:12], "big") + lg.segments[0].base_offset
        got = lg.read(target, 1, FetchIsolation.LOG_END, True).records.read_bytes()
        views = list(corruption.batches(got))
        assert views and views[0].base_offset <= target <= views[0].last_offset
    finally:
        m.shutdown()
