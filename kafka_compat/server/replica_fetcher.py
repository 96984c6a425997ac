"""Followers copy their leaders' logs: Kafka's ReplicaFetcherManager and ReplicaFetcherThread, as asyncio tasks.

One fetcher per (leader, fetcher id), num.replica.fetchers of them per leader,
each a task with its own connection. A fetcher sends Fetch as a follower
(ReplicaId up to v14, ReplicaState with our broker epoch from v15) for every
partition it holds that is ready, with CurrentLeaderEpoch, the fetch offset (our
log end offset) and LastFetchedEpoch (the epoch of our last batch), and appends
what comes back as follower: the leader's offsets and epochs are kept, the high
watermark becomes min(leader's HW, our LEO) and the log start follows the leader.

Truncation happens on fetch (KIP-595 style, IBP 2.7+): the leader answers a
LastFetchedEpoch it does not share with DivergingEpoch{epoch, end offset}, and we
truncate by Kafka's rules (getOffsetTruncationState) and fetch again with the
epoch of our new last batch, which repeats until the logs agree (the KIP-279
loop). A log with no leader epochs (old message format) is truncated to its high
watermark first. OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405) starts the log over
at the leader's local log start, with the epochs and producer snapshot of the
tiered segment below it. OFFSET_OUT_OF_RANGE asks the leader for its end and start
offsets with ListOffsets: past its end we truncate to it (an unclean election),
below its start we start over at its start. FENCED_LEADER_EPOCH stops the
partition until a new LeaderAndIsr; NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH
and the rest are retried after replica.fetch.backoff.ms.

Each fetcher keeps an incremental fetch session (KIP-227, Kafka's FetchSessionHandler)
with its leader: after the first full request, a request names only the partitions
whose fetch offset, epochs or log start changed and forgets the ones no longer
fetched, and the answer holds only partitions with news. A session error, a failed
request or a switch between topic ids and names starts a new session (epoch 0).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.fetch import FetchRequest
from ..protocol.messages.list_offsets import ListOffsetsRequest
from ..protocol.primitives import ZERO_UUID
from .fetch_session import INITIAL_EPOCH, next_epoch

log = logging.getLogger(__name__)

FETCH, LIST_OFFSETS = 1, 2
FETCH_VERSION = 15                 # ReplicaState and topic ids, as Kafka 3.5+ followers send
FETCH_VERSION_NAMES = 12           # topics by name (a topic without a known id), LastFetchedEpoch
LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP = -1, -2, -4
EARLIEST_LOCAL_VERSION = 8             # ListOffsets asks for the earliest local offset from v8 (KIP-405)
FETCHING, TRUNCATING = "Fetching", "Truncating"
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                  ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)


class BrokerEndPoint(NamedTuple):
    """A leader as the fetcher reaches it (fields as the network client's Node)."""

    node_id: int
    host: str
    port: int


class InitialFetchState(NamedTuple):
    leader: BrokerEndPoint
    topic_id: bytes
    current_leader_epoch: int
    init_offset: int


@dataclass
class PartitionFetchState:
    topic_id: bytes
    fetch_offset: int
    current_leader_epoch: int
    state: str = FETCHING
    last_fetched_epoch: int | None = None
    delayed_until: float = 0.0

    def ready(self, now: float) -> bool:
        return self.state == FETCHING and now >= self.delayed_until


@dataclass(frozen=True)
class FetcherConfig:
    """The replica.* settings a fetcher uses (Kafka's names in the comments)."""

    broker_id: int
    max_wait_ms: int = 500                   # replica.fetch.wait.max.ms
    min_bytes: int = 1                       # replica.fetch.min.bytes
    max_bytes: int = 1024 * 1024             # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10 * 1024 * 1024   # replica.fetch.response.max.bytes
    backoff_ms: int = 1000                   # replica.fetch.backoff.ms
    request_timeout_ms: int = 30000          # replica.socket.timeout.ms
    num_fetchers: int = 1                    # num.replica.fetchers

    @classmethod
    def from_broker_config(cls, cfg) -> "FetcherConfig":
        return cls(cfg.broker_id, cfg["replica.fetch.wait.max.ms"], cfg["replica.fetch.min.bytes"],
                   cfg["replica.fetch.max.bytes"], cfg["replica.fetch.response.max.bytes"],
                   cfg["replica.fetch.backoff.ms"], cfg["replica.socket.timeout.ms"],
                   max(cfg["num.replica.fetchers"], 1))


def offset_truncation_state(fetch_offset: int, log_end_offset: int, leader_epoch: int, leader_end_offset: int,
                            follower_end_offset_for_epoch) -> tuple[int, bool]:
    """Kafka's getOffsetTruncationState: (offset to truncate to, whether that settles it).

    ``follower_end_offset_for_epoch(e)`` gives our (largest epoch <= e, its end offset) or None.
    - the leader knows no end offset: keep the fetch offset;
    - the leader gives no epoch: its offset, if below our end;
    - we have the leader's epoch: min(its end here, the leader's end, our end);
    - our largest epoch below it is smaller (we never saw that epoch): the end of ours, and not settled: the
      next fetch carries that earlier epoch and the leader answers again (KIP-279);
    - we have no epoch that old: the leader's end offset, if below ours.
    """
    if leader_end_offset < 0:
        return fetch_offset, True
    if leader_epoch < 0:
        return min(leader_end_offset, log_end_offset), True
    found = follower_end_offset_for_epoch(leader_epoch)
    if found is None:
        return min(leader_end_offset, log_end_offset), True
    follower_epoch, follower_end = found
    if follower_epoch != leader_epoch:
        return min(follower_end, log_end_offset), False
    return min(follower_end, leader_end_offset, log_end_offset), True


class ReplicaFetcher:
    """The partitions this broker follows from one leader, fetched by one task over one connection."""

    def __init__(self, fetcher_id: int, leader: BrokerEndPoint, replica_manager, client, config: FetcherConfig,
                 broker_epoch: Callable[[], int], failed: set):
        self.fetcher_id = fetcher_id
        self.leader = leader
        self.rm = replica_manager
        self.client = client
        self.config = config
        self.broker_epoch = broker_epoch
        self.failed = failed                        # shared with the manager: partitions given up on
        self.partitions: dict[tuple[str, int], PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.running = False
        # the fetch session: its id (0: none), the epoch of the next request (0: open a new one), the
        # version it was opened with, and what the leader holds for each partition in it
        self.session_id = 0
        self.session_epoch = INITIAL_EPOCH
        self._session_version = -1
        self._session_parts: dict[tuple[str, int], tuple] = {}
        self._pending: tuple | None = None          # (incremental, {key: params sent}, forgotten keys)

    def __repr__(self) -> str:
        return f"ReplicaFetcher({self.fetcher_id}, leader={self.leader.node_id}, {len(self.partitions)} partitions)"

    # -- lifecycle
    def start(self) -> None:
        self.running = True
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{self.leader.node_id}")

    async def shutdown(self) -> None:
        self.running = False
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self.client.close()

    # -- partitions
    def add_partitions(self, states: dict[tuple[str, int], InitialFetchState]) -> None:
        for key, initial in states.items():
            self.failed.discard(key)
            current = self.partitions.get(key)
            if current is not None and current.current_leader_epoch == initial.current_leader_epoch:
                continue
            offsets = self.rm.follower_offsets(*key)
            latest = offsets.latest_epoch if offsets is not None else None
            # a log without leader epochs (old message format) first truncates to its high watermark
            state = FETCHING if latest is not None else TRUNCATING
            self.partitions.pop(key, None)
            self.partitions[key] = PartitionFetchState(initial.topic_id, initial.init_offset,
                                                       initial.current_leader_epoch, state, latest)
        self._wakeup.set()

    def remove_partitions(self, keys) -> None:
        for key in keys:
            self.partitions.pop(key, None)

    def _delay(self, keys, now: float | None = None) -> None:
        until = (time.monotonic() if now is None else now) + self.config.backoff_ms / 1000
        for key in keys:
            state = self.partitions.get(key)
            if state is not None and state.delayed_until <= time.monotonic():
                state.delayed_until = until

    def _mark_failed(self, key) -> None:
        """Stop fetching ``key`` until the next LeaderAndIsr adds it again."""
        self.partitions.pop(key, None)
        self.failed.add(key)
        log.warning("fetching %s-%d from broker %d stopped: waiting for a new LeaderAndIsr", key[0], key[1],
                    self.leader.node_id)

    def _on_fenced(self, key, requested_epoch: int) -> bool:
        """FENCED_LEADER_EPOCH: if we asked in our current epoch, the leader is newer than our state: stop.
        If our epoch changed meanwhile, retry later (True)."""
        state = self.partitions.get(key)
        if state is None:
            return False
        if state.current_leader_epoch == requested_epoch:
            self._mark_failed(key)
            return False
        return True

    # -- the loop
    async def _run(self) -> None:
        while self.running:
            try:
                self._truncate_to_high_watermark()
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%r failed; retrying after %d ms", self, self.config.backoff_ms)
                await asyncio.sleep(self.config.backoff_ms / 1000)

    def _truncate_to_high_watermark(self) -> None:
        """Partitions without leader epochs: truncate to the high watermark (the initial fetch offset)."""
        for key, state in list(self.partitions.items()):
            if state.state != TRUNCATING:
                continue
            try:
                self.rm.truncate_follower(key[0], key[1], state.fetch_offset)
            except Exception:
                log.exception("truncating %s-%d failed", *key)
                self._mark_failed(key)
                continue
            offsets = self.rm.follower_offsets(*key)
            state.state = FETCHING
            state.last_fetched_epoch = offsets.latest_epoch if offsets is not None else None

    async def _idle(self, now: float) -> None:
        """Nothing to fetch now: wait for a partition to be added or the first delay to end."""
        self._wakeup.clear()
        delays = [s.delayed_until - now for s in self.partitions.values() if s.state == FETCHING]
        timeout = min([d for d in delays if d > 0], default=self.config.backoff_ms / 1000)
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    def build_fetch(self, now: float) -> tuple[FetchRequest, int, dict] | None:
        """The Fetch for every ready partition: (request, version, {key: the state object it was built from}).

        In an open session the request names only the partitions whose parameters differ from what the
        leader holds, and forgets the session's partitions that are not ready now."""
        ready = {key: state for key, state in self.partitions.items() if state.ready(now)}
        if not ready:
            return None
        version = FETCH_VERSION if all(s.topic_id != ZERO_UUID for s in ready.values()) else FETCH_VERSION_NAMES
        wanted: dict[tuple[str, int], tuple] = {}
        for key, state in ready.items():
            offsets = self.rm.follower_offsets(*key)
            wanted[key] = (state.topic_id, state.fetch_offset, state.current_leader_epoch,
                           state.last_fetched_epoch if state.last_fetched_epoch is not None else -1,
                           offsets.log_start_offset if offsets is not None else -1)
        held = self._session_parts
        incremental = self.session_id != 0 and self.session_epoch > INITIAL_EPOCH and version == self._session_version
        if incremental:
            send = [key for key, params in wanted.items() if held.get(key) != params]
            forgotten = [key for key in held if key not in wanted]
        else:
            send, forgotten = list(wanted), []
        cfg = self.config
        topics: dict[str, FetchRequest.FetchTopic] = {}
        for key in send:
            topic_id, fetch_offset, epoch, last_epoch, log_start = wanted[key]
            entry = topics.get(key[0])
            if entry is None:
                entry = topics[key[0]] = FetchRequest.FetchTopic(topic=key[0], topic_id=topic_id, partitions=[])
            entry.partitions.append(FetchRequest.FetchPartition(
                partition=key[1], current_leader_epoch=epoch, fetch_offset=fetch_offset,
                last_fetched_epoch=last_epoch, log_start_offset=log_start, partition_max_bytes=cfg.max_bytes))
        forgotten_topics: dict[str, FetchRequest.ForgottenTopic] = {}
        for key in forgotten:
            entry = forgotten_topics.get(key[0])
            if entry is None:
                entry = forgotten_topics[key[0]] = FetchRequest.ForgottenTopic(topic=key[0], topic_id=held[key][0],
                                                                               partitions=[])
            entry.partitions.append(key[1])
        request = FetchRequest(replica_id=cfg.broker_id, max_wait_ms=cfg.max_wait_ms, min_bytes=cfg.min_bytes,
                               max_bytes=cfg.response_max_bytes, isolation_level=0, session_id=self.session_id,
                               session_epoch=self.session_epoch if incremental else INITIAL_EPOCH,
                               topics=list(topics.values()), forgotten_topics_data=list(forgotten_topics.values()))
        if version >= 15:
            request.replica_state = FetchRequest.ReplicaState(replica_id=cfg.broker_id,
                                                              replica_epoch=self.broker_epoch())
        self._pending = (incremental, version, wanted, forgotten)
        return request, version, {key: (state, state.fetch_offset, state.current_leader_epoch)
                                  for key, state in ready.items()}

    def _session_answered(self, session_id: int) -> None:
        """The leader answered the request built last: the session now holds what it was sent."""
        incremental, version, wanted, forgotten = self._pending
        if incremental:
            self._session_parts.update(wanted)
            for key in forgotten:
                self._session_parts.pop(key, None)
        else:
            self._session_parts = dict(wanted) if session_id else {}
            self._session_version = version
        self.session_id = session_id
        self.session_epoch = next_epoch(self.session_epoch if incremental else INITIAL_EPOCH) if session_id \
            else INITIAL_EPOCH

    def reset_session(self) -> None:
        """Start over with a full request that closes the current session (Kafka's handleError)."""
        self.session_epoch = INITIAL_EPOCH
        self._session_parts = {}

    async def _fetch_once(self) -> None:
        now = time.monotonic()
        built = self.build_fetch(now)
        if built is None:
            await self._idle(now)
            return
        request, version, sent = built
        try:
            response = await self.client.send(self.leader, FETCH, version, request,
                                              self.config.request_timeout_ms + self.config.max_wait_ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.reset_session()
            if self.running:
                log.info("fetch from broker %d failed: %s", self.leader.node_id, e)
                self._delay(sent)
            return
        if response.error_code:
            self.reset_session()
            if response.error_code in SESSION_ERRORS:
                log.info("fetch session %d with broker %d: %s; starting a new one", self.session_id,
                         self.leader.node_id, ErrorCode(response.error_code).name)
                if response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                    self.session_id = 0
                return
            log.info("fetch from broker %d answered %s", self.leader.node_id, ErrorCode(response.error_code).name)
            self._delay(sent)
            return
        self._session_answered(response.session_id)
        await self.process_fetch_response(response, sent)

    async def process_fetch_response(self, response, sent: dict) -> None:
        names = {state.topic_id: key[0] for key, (state, _, _) in sent.items()}
        errors, diverging = [], {}
        for topic_response in response.responses:
            topic = topic_response.topic or names.get(topic_response.topic_id)
            for pd in topic_response.partitions:
                key = (topic, pd.partition_index)
                entry = sent.get(key)
                if entry is None:
                    continue
                state, fetch_offset, epoch = entry
                # removed, re-added or moved on while the request was out: this answer is not for it
                if self.partitions.get(key) is not state or state.fetch_offset != fetch_offset \
                        or not state.state == FETCHING:
                    continue
                code = pd.error_code
                if code == ErrorCode.NONE:
                    if not self._append(key, state, fetch_offset, pd):
                        errors.append(key)
                    elif pd.diverging_epoch is not None and pd.diverging_epoch.epoch >= 0:
                        diverging[key] = (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if not await self._handle_out_of_range(key, state, epoch):
                        errors.append(key)
                elif code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
                    if not await self._build_remote_log_aux_state(key, state, epoch):
                        errors.append(key)
                elif code == ErrorCode.FENCED_LEADER_EPOCH:
                    if self._on_fenced(key, epoch):
                        errors.append(key)
                else:
                    log.debug("fetching %s-%d from broker %d: %s", topic, pd.partition_index, self.leader.node_id,
                              ErrorCode(code).name if code in ErrorCode._value2member_map_ else code)
                    errors.append(key)
        if diverging:
            self.truncate_on_diverging_epochs(diverging)
        if errors:
            self._delay(errors)

    def _append(self, key, state: PartitionFetchState, fetch_offset: int, pd) -> bool:
        """Kafka's processPartitionData; False if the partition should back off."""
        records = pd.records if pd.records is not None else b""
        try:
            info = self.rm.append_to_follower(key[0], key[1], fetch_offset, records, pd.high_watermark,
                                              pd.log_start_offset)
        except KafkaError as e:
            if e.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                self._mark_failed(key)
                return True
            log.warning("%s-%d: cannot append what broker %d sent at %d: %s", key[0], key[1], self.leader.node_id,
                        fetch_offset, e)
            return False                        # corrupt or out of order: fetch again after the backoff
        except Exception:
            log.exception("%s-%d: unexpected failure appending at %d", key[0], key[1], fetch_offset)
            self._mark_failed(key)
            return True
        if info is not None and info.valid_bytes > 0:
            state.fetch_offset = info.last_offset + 1
            if info.leader_epoch >= 0:
                state.last_fetched_epoch = info.leader_epoch
        return True

    def truncate_on_diverging_epochs(self, diverging: dict) -> None:
        """Truncate each partition where the leader's log differs from ours, then fetch from there."""
        for key, (leader_epoch, leader_end) in diverging.items():
            state = self.partitions.get(key)
            offsets = self.rm.follower_offsets(*key)
            if state is None or offsets is None:
                continue
            offset, _settled = offset_truncation_state(
                state.fetch_offset, offsets.log_end_offset, leader_epoch, leader_end,
                lambda e, key=key: self.rm.follower_end_offset_for_epoch(key[0], key[1], e))
            log.info("%s-%d: the leader diverges at epoch %d (end %d); truncating to %d", key[0], key[1],
                     leader_epoch, leader_end, offset)
            try:
                self.rm.truncate_follower(key[0], key[1], offset)
            except Exception:
                log.exception("truncating %s-%d to %d failed", key[0], key[1], offset)
                self._mark_failed(key)
                continue
            after = self.rm.follower_offsets(*key)
            state.fetch_offset = min(offset, after.log_end_offset)
            state.state = FETCHING
            state.last_fetched_epoch = after.latest_epoch

    async def _list_offset(self, key, epoch: int, timestamp: int, version: int = LIST_OFFSETS_VERSION) -> int:
        topic, index = key
        request = ListOffsetsRequest(replica_id=self.config.broker_id, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=epoch, timestamp=timestamp)])])
        response = await self.client.send(self.leader, LIST_OFFSETS, version, request,
                                          self.config.request_timeout_ms)
        for t in response.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == index:
                    if p.error_code:
                        raise KafkaError(p.error_code)
                    return p.offset
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the leader did not answer for the partition")

    async def _build_remote_log_aux_state(self, key, state: PartitionFetchState, requested_epoch: int) -> bool:
        """Kafka's ReplicaFetcherTierStateMachine: our fetch offset is below the leader's local log start, the
        rest being in remote storage. The remote segment just below that start gives its end, leader epochs and
        producer snapshot; our log starts over after it and fetching goes on from there. False to back off."""
        rlm = self.rm.remote_log_manager
        if rlm is None:
            log.warning("%s-%d: the leader's data is in tiered storage, and this broker has none", *key)
            return False
        try:
            local_start = await self._list_offset(key, state.current_leader_epoch, EARLIEST_LOCAL_TIMESTAMP,
                                                  EARLIEST_LOCAL_VERSION)
            next_offset, epochs, snapshot = await rlm.remote_log_aux_state(key[0], key[1], local_start - 1)
            if self.partitions.get(key) is not state or state.fetch_offset >= next_offset:
                return True
            log.info("%s-%d: the leader's local log starts at %d: starting over at %d, the offsets below being "
                     "in remote storage", key[0], key[1], local_start, next_offset)
            self.rm.build_remote_log_aux_state(key[0], key[1], next_offset, epochs, snapshot)
        except KafkaError as e:
            if e.error_code == ErrorCode.FENCED_LEADER_EPOCH:
                self._on_fenced(key, requested_epoch)
                return True
            log.info("%s-%d: cannot build the log from tiered storage yet: %s", key[0], key[1], e)
            return False
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("%s-%d: cannot build the log from tiered storage yet: %s", key[0], key[1], e)
            return False
        after = self.rm.follower_offsets(*key)
        state.fetch_offset = next_offset
        state.state = FETCHING
        state.last_fetched_epoch = after.latest_epoch if after is not None else None
        return True

    async def _handle_out_of_range(self, key, state: PartitionFetchState, requested_epoch: int) -> bool:
        """Kafka's fetchOffsetAndTruncate; False to back off."""
        try:
            leader_end = await self._list_offset(key, state.current_leader_epoch, LATEST_TIMESTAMP)
            offsets = self.rm.follower_offsets(*key)
            if self.partitions.get(key) is not state or offsets is None:
                return True
            if leader_end < offsets.log_end_offset:
                log.warning("%s-%d: our log ends at %d, past the leader's %d (an unclean election): truncating",
                            key[0], key[1], offsets.log_end_offset, leader_end)
                self.rm.truncate_follower(key[0], key[1], leader_end)
                offset = leader_end
            else:
                leader_start = await self._list_offset(key, state.current_leader_epoch, EARLIEST_TIMESTAMP)
                offsets = self.rm.follower_offsets(*key)
                if self.partitions.get(key) is not state or offsets is None:
                    return True
                if leader_start > offsets.log_end_offset:
                    log.warning("%s-%d: the leader starts at %d, past our end %d: starting over there",
                                key[0], key[1], leader_start, offsets.log_end_offset)
                    self.rm.truncate_follower_fully(key[0], key[1], leader_start)
                    offset = leader_start
                else:
                    offset = offsets.log_end_offset
        except KafkaError as e:
            if e.error_code == ErrorCode.FENCED_LEADER_EPOCH:
                self._on_fenced(key, requested_epoch)       # stopped, or our epoch moved on: no backoff either way
                return True
            log.info("%s-%d: cannot find the leader's offsets: %s", key[0], key[1], e)
            return False
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("%s-%d: cannot find the leader's offsets: %s", key[0], key[1], e)
            return False
        after = self.rm.follower_offsets(*key)
        state.fetch_offset = offset
        state.state = FETCHING
        state.last_fetched_epoch = after.latest_epoch if after is not None else None
        return True


class ReplicaFetcherManager:
    """Which fetcher fetches which partition (Kafka's AbstractFetcherManager)."""

    def __init__(self, replica_manager, client_factory: Callable[[], object], config: FetcherConfig,
                 broker_epoch: Callable[[], int] = lambda: -1):
        """``client_factory()`` gives each fetcher its own client (an object with ``async send(node, api_key,
        api_version, body, timeout_ms)`` and ``async close()``)."""
        self.rm = replica_manager
        self.client_factory = client_factory
        self.config = config
        self.broker_epoch = broker_epoch
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.failed_partitions: set[tuple[str, int]] = set()
        self._closing: set[asyncio.Task] = set()

    def fetcher_id(self, key: tuple[str, int]) -> int:
        return hash(key) % self.config.num_fetchers

    def add_fetcher_for_partitions(self, states: dict[tuple[str, int], InitialFetchState]) -> None:
        grouped: dict[tuple[BrokerEndPoint, int], dict] = {}
        for key, initial in states.items():
            grouped.setdefault((initial.leader, self.fetcher_id(key)), {})[key] = initial
        for (leader, fid), batch in grouped.items():
            fetcher = self.fetchers.get((leader.node_id, fid))
            if fetcher is not None and fetcher.leader != leader:        # the leader moved: a new connection
                self._stop(self.fetchers.pop((leader.node_id, fid)))
                fetcher = None
            if fetcher is None:
                fetcher = ReplicaFetcher(fid, leader, self.rm, self.client_factory(), self.config, self.broker_epoch,
                                         self.failed_partitions)
                self.fetchers[(leader.node_id, fid)] = fetcher
                fetcher.start()
            fetcher.add_partitions(batch)
            log.info("fetching %s from broker %d", ", ".join(f"{t}-{p}@{s.init_offset}" for (t, p), s in
                                                           batch.items()), leader.node_id)

    def remove_fetcher_for_partitions(self, keys) -> None:
        keys = list(keys)
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(keys)
        self.failed_partitions.difference_update(keys)

    def fetch_state(self, key) -> PartitionFetchState | None:
        for fetcher in self.fetchers.values():
            state = fetcher.partitions.get(key)
            if state is not None:
                return state
        return None

    def shutdown_idle_fetchers(self) -> None:
        for fid, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                self._stop(self.fetchers.pop(fid))

    def _stop(self, fetcher: ReplicaFetcher) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.shutdown())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def shutdown(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.shutdown() for f in fetchers), *self._closing, return_exceptions=True)
