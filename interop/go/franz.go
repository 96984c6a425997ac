package main

// franz-go (github.com/twmb/franz-go): kgo for producing, consuming, groups and transactions, kadm
// for the admin calls.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type franz struct {
	o   *Opts
	cl  *kgo.Client
	adm *kadm.Client
}

func newFranz(o *Opts) (*franz, error) {
	f := &franz{o: o}
	cl, err := kgo.NewClient(f.opts()...)
	if err != nil {
		return nil, err
	}
	f.cl, f.adm = cl, kadm.NewClient(cl)
	return f, nil
}

func (f *franz) Close() { f.cl.Close() }

// opts: the options every client of a scenario has, then extra.
func (f *franz) opts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(f.o.Brokers...), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.FetchMaxWait(250 * time.Millisecond)}
	if f.o.Verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return append(opts, extra...)
}

func franzCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", name)
}

func fromKgo(r *kgo.Record) Rec {
	return Rec{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)}
}

func toKgo(r Rec) *kgo.Record {
	kr := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: []byte(r.Key), Value: []byte(r.Value)}
	if r.Time != 0 {
		kr.Timestamp = time.UnixMilli(r.Time)
	}
	return kr
}

func (f *franz) CreateTopic(ctx context.Context, topic string, partitions, rf int, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := f.adm.CreateTopic(ctx, int32(partitions), int16(rf), cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return err
	}
	return f.waitTopic(ctx, topic, partitions)
}

// waitTopic: until metadata names a leader for each of the topic's partitions.
func (f *franz) waitTopic(ctx context.Context, topic string, partitions int) error {
	return waitFor(ctx, "the leaders of "+topic, 100*time.Millisecond, func() bool {
		tds, err := f.adm.ListTopics(ctx, topic)
		if err != nil {
			return false
		}
		td, ok := tds[topic]
		if !ok || td.Err != nil || len(td.Partitions) != partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
		return true
	})
}

func (f *franz) Produce(ctx context.Context, codec string, recs []Rec) ([]Rec, error) {
	c, err := franzCodec(codec)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(f.opts(kgo.ProducerBatchCompression(c), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	krecs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krecs[i] = toKgo(r)
	}
	var acked []Rec
	for _, res := range cl.ProduceSync(ctx, krecs...) {
		if res.Err != nil {
			return acked, fmt.Errorf("%s at partition %d: %w", res.Record.Value, res.Record.Partition, res.Err)
		}
		acked = append(acked, fromKgo(res.Record))
	}
	return acked, nil
}

func (f *franz) ends(ctx context.Context, topic string, committed bool) (map[int32]int64, error) {
	list := f.adm.ListEndOffsets
	if committed {
		list = f.adm.ListCommittedOffsets // the last stable offsets
	}
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends, nil
}

func (f *franz) ReadAll(ctx context.Context, topic string, partitions int, committed bool, quiet time.Duration) ([]Rec, error) {
	var ends map[int32]int64
	if err := retry(ctx, "list the end offsets of "+topic, func() (err error) {
		ends, err = f.ends(ctx, topic, committed)
		if err == nil && len(ends) != partitions {
			err = fmt.Errorf("%d partitions listed, want %d", len(ends), partitions)
		}
		return err
	}); err != nil {
		return nil, err
	}
	from := map[int32]kgo.Offset{}
	for p := range ends {
		from[p] = kgo.NewOffset().AtStart()
	}
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(f.opts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(isolation))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rd := newReader(ends)
	for !rd.complete(quiet) {
		if ctx.Err() != nil {
			return rd.records(), fmt.Errorf("reading %s: %w", topic, ctx.Err())
		}
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fetchErr(fs); err != nil {
			return rd.records(), err
		}
		fs.EachRecord(func(r *kgo.Record) { rd.add(fromKgo(r)) })
	}
	return rd.records(), nil
}

// fetchErr: the first error of a poll that is not its own context ending.
func fetchErr(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) ||
			errors.Is(e.Err, kgo.ErrClientClosed) {
			continue
		}
		return fmt.Errorf("fetch %s[%d]: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// --- group ----------------------------------------------------------------------------------------

// protocolCounter counts the group requests a client writes: which group protocol it really spoke.
type protocolCounter struct{ joinGroup, heartbeat848 atomic.Int64 }

func (c *protocolCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch kmsg.Key(key) {
	case kmsg.JoinGroup:
		c.joinGroup.Add(1)
	case kmsg.ConsumerGroupHeartbeat:
		c.heartbeat848.Add(1)
	}
}

type franzMember struct {
	name     string
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	consumed []Rec
	done     chan struct{}
}

func (m *franzMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (m *franzMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.consumed)
}

func (f *franz) member(ctx context.Context, o *Opts, name string, counter *protocolCounter) (*franzMember, error) {
	m := &franzMember{name: name, assigned: map[int32]bool{}, done: make(chan struct{})}
	change := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[o.Topic] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	opts := f.opts(kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(o.Topic), kgo.ClientID("franz-go-"+name),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.HeartbeatInterval(500*time.Millisecond), kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsAssigned(change(true)), kgo.OnPartitionsRevoked(change(false)),
		kgo.OnPartitionsLost(change(false)), kgo.WithHooks(counter))
	if o.Protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			if err := fetchErr(fs); err != nil {
				problem("member %s: %v", name, err)
			}
			recs := fs.Records()
			m.mu.Lock()
			for _, r := range recs {
				m.consumed = append(m.consumed, fromKgo(r))
				emitRec("record", fromKgo(r), "member", name)
			}
			m.mu.Unlock()
			if len(recs) > 0 {
				if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
					problem("member %s: commit: %v", name, err)
				}
			}
		}
	}()
	return m, nil
}

func (f *franz) Group(ctx context.Context, o *Opts) error {
	if err := f.CreateTopic(ctx, o.Topic, o.Partitions, o.RF, nil); err != nil {
		return err
	}
	counter := &protocolCounter{}
	a, err := f.member(ctx, o, "a", counter)
	if err != nil {
		return err
	}
	defer a.cl.Close()
	if err := waitFor(ctx, "member a to have every partition", 50*time.Millisecond, func() bool {
		return len(a.partitions()) == o.Partitions
	}); err != nil {
		return err
	}
	emit("assignment", "member", "a", "partitions", a.partitions(), "stage", "alone")
	b, err := f.member(ctx, o, "b", counter)
	if err != nil {
		return err
	}
	defer b.cl.Close()
	members := []*franzMember{a, b}
	if err := waitSplit(ctx, o.Partitions, func() [][]int32 { return [][]int32{a.partitions(), b.partitions()} }); err != nil {
		return err
	}
	acked, err := f.Produce(ctx, "none", records(o.Topic, "g", o.Count, o.Partitions))
	if err != nil {
		return err
	}
	for _, r := range acked {
		emitRec("ack", r)
	}
	if err := waitFor(ctx, "every record to be consumed", 50*time.Millisecond, func() bool {
		return a.count()+b.count() >= len(acked)
	}); err != nil {
		return err
	}
	time.Sleep(o.Quiet) // time for a record consumed twice to show
	assigned, consumed := map[string][]int32{}, map[string][]Rec{}
	for _, m := range members {
		memberID, generation := m.cl.GroupMetadata()
		assigned[m.name] = m.partitions()
		m.mu.Lock()
		consumed[m.name] = append([]Rec(nil), m.consumed...)
		m.mu.Unlock()
		emit("assignment", "member", m.name, "partitions", assigned[m.name], "stage", "end", "member_id", memberID,
			"generation", generation)
	}
	if err := f.describeGroup(ctx, o); err != nil {
		return err
	}
	if err := f.checkCommitted(ctx, o.Group, o.Topic); err != nil {
		return err
	}
	protocol := "classic"
	if counter.heartbeat848.Load() > 0 && counter.joinGroup.Load() == 0 {
		protocol = "consumer"
	}
	emit("protocol", "protocol", protocol, "join_group", counter.joinGroup.Load(),
		"consumer_group_heartbeat", counter.heartbeat848.Load())
	if protocol != o.Protocol {
		problem("asked for the %s group protocol, the members spoke %s", o.Protocol, protocol)
	}
	membersCheck(assigned, consumed, acked, o.Partitions)
	return nil
}

// waitSplit: until two members hold every partition between them, neither empty, for a second.
func waitSplit(ctx context.Context, partitions int, current func() [][]int32) error {
	split := func() bool {
		seen := map[int32]bool{}
		for _, ps := range current() {
			if len(ps) == 0 {
				return false
			}
			for _, p := range ps {
				if seen[p] {
					return false
				}
				seen[p] = true
			}
		}
		return len(seen) == partitions
	}
	var since time.Time
	return waitFor(ctx, "the partitions to be split between the members", 50*time.Millisecond, func() bool {
		if !split() {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < time.Second {
			return false
		}
		for i, ps := range current() {
			emit("assignment", "member", string(rune('a'+i)), "partitions", ps, "stage", "split")
		}
		return true
	})
}

// describeGroup prints the coordinator's view of the group: DescribeGroups for a classic group,
// ConsumerGroupDescribe (KIP-848) for a consumer group.
func (f *franz) describeGroup(ctx context.Context, o *Opts) error {
	type member struct {
		MemberID   string  `json:"member_id"`
		ClientID   string  `json:"client_id"`
		Partitions []int32 `json:"partitions"`
	}
	var members []member
	var state, protocolType, assignor string
	if o.Protocol == "consumer" {
		described, err := f.adm.DescribeConsumerGroups(ctx, o.Group)
		if err != nil {
			return err
		}
		g := described[o.Group]
		if g.Err != nil {
			return fmt.Errorf("describe consumer group %s: %w", o.Group, g.Err)
		}
		state, protocolType, assignor = g.State, "consumer", g.AssignorName
		for _, m := range g.Members {
			var ps []int32
			for p := range m.Assignment[o.Topic] {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			members = append(members, member{m.MemberID, m.ClientID, ps})
		}
	} else {
		described, err := f.adm.DescribeGroups(ctx, o.Group)
		if err != nil {
			return err
		}
		g := described[o.Group]
		if g.Err != nil {
			return fmt.Errorf("describe group %s: %w", o.Group, g.Err)
		}
		state, protocolType, assignor = g.State, g.ProtocolType, g.Protocol
		for _, m := range g.Members {
			var ps []int32
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					if t.Topic == o.Topic {
						ps = append(ps, t.Partitions...)
					}
				}
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			members = append(members, member{m.MemberID, m.ClientID, ps})
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].ClientID < members[j].ClientID })
	emit("described", "group", o.Group, "state", state, "protocol_type", protocolType, "assignor", assignor,
		"members", members)
	return nil
}

// checkCommitted prints the group's committed offsets and the topic's end offsets; a problem unless equal.
func (f *franz) checkCommitted(ctx context.Context, group, topic string) error {
	fetched, err := f.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return fmt.Errorf("fetch the offsets of %s: %w", group, err)
	}
	committed := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			committed[o.Partition] = o.At
		}
	})
	ends, err := f.ends(ctx, topic, false)
	if err != nil {
		return err
	}
	emit("committed", "group", group, "topic", topic, "offsets", committed, "ends", ends)
	if fmt.Sprint(committed) != fmt.Sprint(ends) {
		problem("group %s committed %v, the ends of %s are %v", group, committed, topic, ends)
	}
	return nil
}

// --- transactions -----------------------------------------------------------------------------------

// Txn: consume-transform-produce with a GroupTransactSession. Every third transaction is flushed (its
// records reach the log) and then aborted; the session rewinds to the committed offsets, so a later
// transaction copies those records again. Then read_committed must see each input record's copy
// exactly once, in order, and read_uncommitted every copy, aborted ones included.
func (f *franz) Txn(ctx context.Context, o *Opts) error {
	in, outTopic := o.Topic+"-in", o.Topic+"-out"
	for _, t := range []string{in, outTopic} {
		if err := f.CreateTopic(ctx, t, o.Partitions, o.RF, nil); err != nil {
			return err
		}
	}
	input, err := f.Produce(ctx, "none", records(in, "in", o.Count, o.Partitions))
	if err != nil {
		return err
	}
	for _, r := range input {
		emitRec("input", r)
	}
	sess, err := kgo.NewGroupTransactSession(f.opts(kgo.TransactionalID(o.Topic+"-txn"),
		kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.TransactionTimeout(30*time.Second))...)
	if err != nil {
		return err
	}
	defer sess.Close()
	committedIn := map[[2]int64]bool{}
	copies := 0
	for n := 1; len(committedIn) < len(input); {
		if ctx.Err() != nil {
			return fmt.Errorf("copying: %w after %d of %d records committed", ctx.Err(), len(committedIn), len(input))
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := sess.PollRecords(pctx, 17)
		cancel()
		if err := fetchErr(fs); err != nil {
			return err
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		abort := n%3 == 2
		var produceErr error
		var mu sync.Mutex
		var values []string
		for _, r := range recs {
			values = append(values, fmt.Sprintf("%d:%d:%s", r.Partition, r.Offset, r.Value))
			out := &kgo.Record{Topic: outTopic, Partition: r.Partition, Key: r.Key, Value: append([]byte("t-"), r.Value...)}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && produceErr == nil {
					produceErr = err
				}
			})
		}
		if abort {
			// the aborted copies really reach the log before the abort marker
			if err := sess.Client().Flush(ctx); err != nil {
				return err
			}
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!abort))
		if err != nil {
			return fmt.Errorf("end transaction %d: %w", n, err)
		}
		mu.Lock()
		if produceErr != nil && committed {
			problem("transaction %d committed although a produce failed: %v", n, produceErr)
		}
		mu.Unlock()
		copies += len(recs)
		emit("txn", "n", n, "abort", abort, "committed", committed, "records", values)
		if committed {
			for _, r := range recs {
				id := [2]int64{int64(r.Partition), r.Offset}
				if committedIn[id] {
					problem("input %d:%d copied by two committed transactions", r.Partition, r.Offset)
				}
				committedIn[id] = true
			}
		}
		n++
	}
	sess.Close()
	return f.checkCopies(ctx, o, input, outTopic, copies)
}

// checkCopies reads the output back both ways and checks it against the input.
func (f *franz) checkCopies(ctx context.Context, o *Opts, input []Rec, outTopic string, copies int) error {
	readCommitted, err := f.ReadAll(ctx, outTopic, o.Partitions, true, o.Quiet)
	if err != nil {
		return err
	}
	for _, r := range readCommitted {
		emitRec("read_committed", r)
	}
	readUncommitted, err := f.ReadAll(ctx, outTopic, o.Partitions, false, o.Quiet)
	if err != nil {
		return err
	}
	emit("read_uncommitted", "records", len(readUncommitted), "copies", copies)
	if len(readUncommitted) != copies {
		problem("read_uncommitted read %d records, %d copies were produced", len(readUncommitted), copies)
	}
	want, got := map[int32][]string{}, map[int32][]string{}
	for _, r := range input {
		want[r.Partition] = append(want[r.Partition], "t-"+r.Value)
	}
	for _, r := range readCommitted {
		got[r.Partition] = append(got[r.Partition], r.Value)
	}
	for p := range want {
		if strings.Join(want[p], ",") != strings.Join(got[p], ",") {
			problem("read_committed partition %d: %d records, want the %d copies of the input in order", p,
				len(got[p]), len(want[p]))
		}
	}
	return f.checkCommitted(ctx, o.Group, input[0].Topic)
}

// --- admin ----------------------------------------------------------------------------------------

func (f *franz) Admin(ctx context.Context, o *Opts) error {
	a, b := o.Topic+"-a", o.Topic+"-b"
	brokers, err := f.adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("list brokers: %w", err)
	}
	emit("brokers", "ids", brokers.NodeIDs())

	created, err := f.adm.CreateTopics(ctx, int32(o.Partitions), int16(o.RF),
		map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, a, b)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range created.Sorted() {
		emit("created", "topic", t.Topic, "error", errText(t.Err), "partitions", t.NumPartitions,
			"replication_factor", t.ReplicationFactor, "has_id", t.ID != [16]byte{})
	}
	again, err := f.adm.CreateTopics(ctx, int32(o.Partitions), int16(o.RF), nil, a)
	if err != nil {
		return err
	}
	emit("created_again", "topic", a, "error", errText(again[a].Err),
		"already_exists", errors.Is(again[a].Err, kerr.TopicAlreadyExists))
	for _, t := range []string{a, b} {
		if err := f.waitTopic(ctx, t, o.Partitions); err != nil {
			return err
		}
	}
	if err := f.emitTopics(ctx, "listed", a, b); err != nil {
		return err
	}

	if err := f.emitConfigs(ctx, "initial", a); err != nil {
		return err
	}
	altered, err := f.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, a)
	if err != nil {
		return fmt.Errorf("incremental alter configs: %w", err)
	}
	for _, r := range altered {
		emit("altered", "how", "incremental", "topic", r.Name, "error", errText(r.Err))
	}
	if err := f.emitConfigs(ctx, "after_incremental", a); err != nil {
		return err
	}
	// AlterConfigs (not incremental) replaces the topic's whole set of overrides
	altered, err = f.adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{
		{Name: "max.message.bytes", Value: kadm.StringPtr("200000")},
	}, b)
	if err != nil {
		return fmt.Errorf("alter configs: %w", err)
	}
	for _, r := range altered {
		emit("altered", "how", "state", "topic", r.Name, "error", errText(r.Err))
	}
	if err := f.emitConfigs(ctx, "after_state", b); err != nil {
		return err
	}

	grown, err := f.adm.CreatePartitions(ctx, 2, b)
	if err != nil {
		return fmt.Errorf("create partitions: %w", err)
	}
	emit("partitions_created", "topic", b, "error", errText(grown[b].Err))
	if err := f.waitTopic(ctx, b, o.Partitions+2); err != nil {
		return err
	}
	if err := f.emitTopics(ctx, "listed_grown", b); err != nil {
		return err
	}

	base := time.Now().Add(-time.Minute).UnixMilli()
	acked, err := f.Produce(ctx, "none", timed(records(a, "adm", o.Count, o.Partitions), base))
	if err != nil {
		return err
	}
	emit("produced", "topic", a, "records", len(acked), "base_timestamp", base)
	if err := f.emitOffsets(ctx, a, base); err != nil {
		return err
	}

	// a group with one member that has consumed everything and committed: list, describe, fetch offsets
	m, err := kgo.NewClient(f.opts(kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(a), kgo.ClientID("franz-go-admin"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())...)
	if err != nil {
		return err
	}
	defer m.Close()
	for consumed := 0; consumed < len(acked); {
		fs := m.PollFetches(ctx)
		if err := fetchErr(fs); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		consumed += fs.NumRecords()
	}
	if err := m.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	listedGroups, err := f.adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	var names []string
	for _, g := range listedGroups.Sorted() {
		if strings.HasPrefix(g.Group, o.Topic) {
			names = append(names, g.Group)
			emit("group_listed", "group", g.Group, "state", g.State, "protocol_type", g.ProtocolType)
		}
	}
	emit("groups", "groups", names)
	o2 := *o
	o2.Topic, o2.Protocol = a, "classic"
	if err := f.describeGroup(ctx, &o2); err != nil {
		return err
	}
	if err := f.checkCommitted(ctx, o.Group, a); err != nil {
		return err
	}
	lag, err := f.adm.Lag(ctx, o.Group)
	if err != nil {
		return fmt.Errorf("lag: %w", err)
	}
	emit("lag", "group", o.Group, "total", lag[o.Group].Lag.Total())
	m.Close() // leaves the group: it is Empty, with its offsets, and can be deleted
	gone, err := f.adm.DeleteGroup(ctx, o.Group)
	if err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	emit("group_deleted", "group", o.Group, "error", errText(gone.Err))
	listedGroups, err = f.adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	_, has := listedGroups[o.Group]
	emit("groups_after_delete", "has_group", has)

	deleted, err := f.adm.DeleteTopics(ctx, a, b)
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	for _, d := range deleted.Sorted() {
		emit("deleted", "topic", d.Topic, "error", errText(d.Err))
	}
	// kadm.ListTopics answers from the client's metadata cache for MetadataMinAge, which can still
	// hold a topic just deleted: ask the broker with a Metadata request of our own
	var left []string
	if err := waitFor(ctx, "the deleted topics to go", 100*time.Millisecond, func() bool {
		left, err = f.brokerTopics(ctx, a, b)
		return err == nil && len(left) == 0
	}); err != nil {
		return fmt.Errorf("%w: still listed: %v", err, left)
	}
	emit("listed_after_delete", "has_a", false, "has_b", false)
	return nil
}

// brokerTopics: which of names a Metadata request for every topic lists.
func (f *franz) brokerTopics(ctx context.Context, names ...string) ([]string, error) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, f.cl)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, t := range resp.Topics {
		for _, n := range names {
			if t.Topic != nil && *t.Topic == n {
				found = append(found, n)
			}
		}
	}
	return found, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type partitionInfo struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
}

func (f *franz) emitTopics(ctx context.Context, event string, topics ...string) error {
	tds, err := f.adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	all, err := f.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	for _, t := range topics {
		td := tds[t]
		var ps []partitionInfo
		for _, p := range td.Partitions.Sorted() {
			ps = append(ps, partitionInfo{p.Partition, p.Leader, p.Replicas, p.ISR})
		}
		emit(event, "topic", t, "error", errText(td.Err), "in_all", all.Has(t), "internal", td.IsInternal,
			"partitions", ps)
	}
	return nil
}

// emitConfigs prints the topic's settings that the scenario changes, with their sources.
func (f *franz) emitConfigs(ctx context.Context, stage, topic string) error {
	described, err := f.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	rc, err := described.On(topic, nil)
	if err != nil {
		return err
	}
	if rc.Err != nil {
		return fmt.Errorf("describe configs of %s: %w", topic, rc.Err)
	}
	configs := map[string]map[string]string{}
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes":
			configs[c.Key] = map[string]string{"value": c.MaybeValue(), "source": c.Source.String()}
		}
	}
	emit("configs", "stage", stage, "topic", topic, "count", len(rc.Configs), "configs", configs)
	return nil
}

func (f *franz) emitOffsets(ctx context.Context, topic string, base int64) error {
	kinds := []struct {
		name string
		list func() (kadm.ListedOffsets, error)
	}{
		{"start", func() (kadm.ListedOffsets, error) { return f.adm.ListStartOffsets(ctx, topic) }},
		{"end", func() (kadm.ListedOffsets, error) { return f.adm.ListEndOffsets(ctx, topic) }},
		{"committed", func() (kadm.ListedOffsets, error) { return f.adm.ListCommittedOffsets(ctx, topic) }},
		{"after_start", func() (kadm.ListedOffsets, error) { return f.adm.ListOffsetsAfterMilli(ctx, base-1000, topic) }},
		{"after_mid", func() (kadm.ListedOffsets, error) { return f.adm.ListOffsetsAfterMilli(ctx, base+15, topic) }},
		{"after_end", func() (kadm.ListedOffsets, error) {
			return f.adm.ListOffsetsAfterMilli(ctx, time.Now().Add(time.Hour).UnixMilli(), topic)
		}},
		{"max_timestamp", func() (kadm.ListedOffsets, error) { return f.adm.ListMaxTimestampOffsets(ctx, topic) }},
	}
	for _, k := range kinds {
		listed, err := k.list()
		if err != nil {
			return fmt.Errorf("list %s offsets: %w", k.name, err)
		}
		offsets := map[int32]int64{}
		var errs []string
		listed.Each(func(o kadm.ListedOffset) {
			offsets[o.Partition] = o.Offset
			if o.Err != nil {
				errs = append(errs, fmt.Sprintf("%d: %v", o.Partition, o.Err))
			}
		})
		emit("offsets", "kind", k.name, "topic", topic, "offsets", offsets, "errors", errs)
	}
	return nil
}

// --- produce until stopped ------------------------------------------------------------------------

// Stream: an idempotent acks=all producer (franz-go's default) writing v-<i> to partition i % partitions.
func (f *franz) Stream(ctx, stop context.Context, o *Opts) error {
	cl, err := kgo.NewClient(f.opts(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(200), kgo.ProducerLinger(2*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	sent := 0
	var acked, failed atomic.Int64
	for ; stop.Err() == nil && ctx.Err() == nil; sent++ {
		r := toKgo(Rec{Topic: o.Topic, Partition: int32(sent % o.Partitions), Key: fmt.Sprintf("k-%d", sent),
			Value: fmt.Sprintf("v-%d", sent)})
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				emitRec("failed", fromKgo(r), "error", err.Error())
				return
			}
			acked.Add(1)
			emitRec("ack", fromKgo(r))
		})
		select {
		case <-stop.Done():
		case <-time.After(o.Interval):
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	emit("stopped", "sent", sent, "acked", acked.Load(), "failed", failed.Load())
	return nil
}
