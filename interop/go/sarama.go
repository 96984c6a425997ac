package main

// sarama (github.com/IBM/sarama): SyncProducer/AsyncProducer, Consumer, ConsumerGroup, the
// transactional producer and ClusterAdmin. Sarama has no KIP-848 consumer: its groups are classic.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type saramaDriver struct {
	o      *Opts
	client sarama.Client
	admin  sarama.ClusterAdmin
}

func newSarama(o *Opts) (*saramaDriver, error) {
	if o.Verbose {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	s := &saramaDriver{o: o}
	client, err := sarama.NewClient(o.Brokers, s.config())
	if err != nil {
		return nil, err
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.client, s.admin = client, admin
	return s, nil
}

func (s *saramaDriver) Close() { _ = s.admin.Close() } // closes the client too

// config: what every sarama client of a scenario shares.
func (s *saramaDriver) config() *sarama.Config {
	c := sarama.NewConfig()
	// the newest Kafka this sarama knows: it clamps each request's version to what ApiVersions advertises
	c.Version = sarama.MaxVersion
	c.ClientID = "sarama"
	c.Metadata.Retry.Max = 50
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	c.Consumer.MaxWaitTime = 250 * time.Millisecond
	c.Consumer.Return.Errors = true
	return c
}

func saramaCodec(name string) (sarama.CompressionCodec, error) {
	switch name {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("unknown codec %q", name)
}

func toSarama(r Rec) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: r.Topic, Partition: r.Partition, Key: sarama.StringEncoder(r.Key),
		Value: sarama.StringEncoder(r.Value), Metadata: r}
	if r.Time != 0 {
		m.Timestamp = time.UnixMilli(r.Time)
	}
	return m
}

func fromSaramaProduced(m *sarama.ProducerMessage) Rec {
	r := m.Metadata.(Rec)
	r.Partition, r.Offset = m.Partition, m.Offset
	return r
}

func fromSarama(m *sarama.ConsumerMessage) Rec {
	return Rec{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)}
}

func (s *saramaDriver) CreateTopic(ctx context.Context, topic string, partitions, rf int, configs map[string]string) error {
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	err := s.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions),
		ReplicationFactor: int16(rf), ConfigEntries: entries}, false)
	if err != nil {
		return err
	}
	return s.waitTopic(ctx, topic, partitions)
}

func (s *saramaDriver) waitTopic(ctx context.Context, topic string, partitions int) error {
	return waitFor(ctx, "the leaders of "+topic, 100*time.Millisecond, func() bool {
		if err := s.client.RefreshMetadata(topic); err != nil {
			return false
		}
		ps, err := s.client.Partitions(topic)
		if err != nil || len(ps) != partitions {
			return false
		}
		for _, p := range ps {
			if _, err := s.client.Leader(topic, p); err != nil {
				return false
			}
		}
		return true
	})
}

func (s *saramaDriver) Produce(ctx context.Context, codec string, recs []Rec) ([]Rec, error) {
	c, err := saramaCodec(codec)
	if err != nil {
		return nil, err
	}
	cfg := s.config()
	cfg.Producer.Compression = c
	p, err := sarama.NewSyncProducer(s.o.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		msgs[i] = toSarama(r)
	}
	if err := p.SendMessages(msgs); err != nil {
		return nil, err
	}
	acked := make([]Rec, len(msgs))
	for i, m := range msgs {
		acked[i] = fromSaramaProduced(m)
	}
	return acked, nil
}

func (s *saramaDriver) ends(topic string) (map[int32]int64, error) {
	if err := s.client.RefreshMetadata(topic); err != nil {
		return nil, err
	}
	ps, err := s.client.Partitions(topic)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, p := range ps {
		end, err := s.client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("the end of %s[%d]: %w", topic, p, err)
		}
		ends[p] = end
	}
	return ends, nil
}

func (s *saramaDriver) ReadAll(ctx context.Context, topic string, partitions int, committed bool, quiet time.Duration) ([]Rec, error) {
	var ends map[int32]int64
	if err := retry(ctx, "list the end offsets of "+topic, func() (err error) {
		ends, err = s.ends(topic)
		if err == nil && len(ends) != partitions {
			err = fmt.Errorf("%d partitions listed, want %d", len(ends), partitions)
		}
		return err
	}); err != nil {
		return nil, err
	}
	cfg := s.config()
	if committed {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	consumer, err := sarama.NewConsumer(s.o.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	rd := newReader(ends)
	var wg sync.WaitGroup
	for p := range ends {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume %s[%d]: %w", topic, p, err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for m := range pc.Messages() {
				rd.add(fromSarama(m))
			}
		}()
		go func() {
			defer wg.Done()
			for err := range pc.Errors() {
				logf("sarama consumer %s[%d]: %v", topic, p, err)
			}
		}()
		defer pc.AsyncClose()
	}
	err = waitFor(ctx, "reading "+topic, 50*time.Millisecond, func() bool { return rd.complete(quiet) })
	return rd.records(), err
}

// --- group ----------------------------------------------------------------------------------------

type saramaMember struct {
	name       string
	topic      string
	cg         sarama.ConsumerGroup
	mu         sync.Mutex
	assigned   []int32
	memberID   string
	generation int32
	consumed   []Rec
	done       chan struct{}
}

func (m *saramaMember) Setup(sess sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = append([]int32(nil), sess.Claims()[m.topic]...)
	sort.Slice(m.assigned, func(i, j int) bool { return m.assigned[i] < m.assigned[j] })
	m.memberID, m.generation = sess.MemberID(), sess.GenerationID()
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = nil
	return nil
}

func (m *saramaMember) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		r := fromSarama(msg)
		m.mu.Lock()
		m.consumed = append(m.consumed, r)
		m.mu.Unlock()
		emitRec("record", r, "member", m.name)
		sess.MarkMessage(msg, "")
		if len(claim.Messages()) == 0 {
			sess.Commit() // synchronous: what was consumed so far is committed before the next poll
		}
	}
	return nil
}

func (m *saramaMember) state() ([]int32, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.assigned...), len(m.consumed)
}

func (s *saramaDriver) member(ctx context.Context, topic, group, name string) (*saramaMember, error) {
	cfg := s.config()
	cfg.ClientID = "sarama-" + name
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	cg, err := sarama.NewConsumerGroup(s.o.Brokers, group, cfg)
	if err != nil {
		return nil, err
	}
	m := &saramaMember{name: name, topic: topic, cg: cg, done: make(chan struct{})}
	go func() {
		for err := range cg.Errors() {
			if ctx.Err() == nil {
				logf("sarama member %s: %v", name, err)
			}
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			// Consume returns at each rebalance; calling it again rejoins
			if err := cg.Consume(ctx, []string{topic}, m); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				logf("sarama member %s: consume: %v", name, err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	return m, nil
}

func (s *saramaDriver) Group(ctx context.Context, o *Opts) error {
	if err := s.CreateTopic(ctx, o.Topic, o.Partitions, o.RF, nil); err != nil {
		return err
	}
	a, err := s.member(ctx, o.Topic, o.Group, "a")
	if err != nil {
		return err
	}
	defer a.cg.Close()
	if err := waitFor(ctx, "member a to have every partition", 50*time.Millisecond, func() bool {
		ps, _ := a.state()
		return len(ps) == o.Partitions
	}); err != nil {
		return err
	}
	ps, _ := a.state()
	emit("assignment", "member", "a", "partitions", ps, "stage", "alone")
	b, err := s.member(ctx, o.Topic, o.Group, "b")
	if err != nil {
		return err
	}
	defer b.cg.Close()
	members := []*saramaMember{a, b}
	if err := waitSplit(ctx, o.Partitions, func() [][]int32 {
		pa, _ := a.state()
		pb, _ := b.state()
		return [][]int32{pa, pb}
	}); err != nil {
		return err
	}
	acked, err := s.Produce(ctx, "none", records(o.Topic, "g", o.Count, o.Partitions))
	if err != nil {
		return err
	}
	for _, r := range acked {
		emitRec("ack", r)
	}
	if err := waitFor(ctx, "every record to be consumed", 50*time.Millisecond, func() bool {
		_, na := a.state()
		_, nb := b.state()
		return na+nb >= len(acked)
	}); err != nil {
		return err
	}
	time.Sleep(o.Quiet)
	assigned, consumed := map[string][]int32{}, map[string][]Rec{}
	for _, m := range members {
		m.mu.Lock()
		assigned[m.name] = append([]int32(nil), m.assigned...)
		consumed[m.name] = append([]Rec(nil), m.consumed...)
		emit("assignment", "member", m.name, "partitions", m.assigned, "stage", "end", "member_id", m.memberID,
			"generation", m.generation)
		m.mu.Unlock()
	}
	if err := s.describeGroup(o.Group, o.Topic); err != nil {
		return err
	}
	if err := s.checkCommitted(o.Group, o.Topic); err != nil {
		return err
	}
	membersCheck(assigned, consumed, acked, o.Partitions)
	return nil
}

func (s *saramaDriver) describeGroup(group, topic string) error {
	described, err := s.admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	type member struct {
		MemberID   string  `json:"member_id"`
		ClientID   string  `json:"client_id"`
		Partitions []int32 `json:"partitions"`
	}
	for _, g := range described {
		if !errors.Is(g.Err, sarama.ErrNoError) {
			return fmt.Errorf("describe group %s: %w", group, g.Err)
		}
		var members []member
		for id, m := range g.Members {
			a, err := m.GetMemberAssignment()
			if err != nil {
				return fmt.Errorf("the assignment of %s: %w", id, err)
			}
			var ps []int32
			if a != nil {
				ps = append(ps, a.Topics[topic]...)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			members = append(members, member{id, m.ClientId, ps})
		}
		sort.Slice(members, func(i, j int) bool { return members[i].ClientID < members[j].ClientID })
		emit("described", "group", g.GroupId, "state", g.State, "protocol_type", g.ProtocolType,
			"assignor", g.Protocol, "members", members)
	}
	return nil
}

func (s *saramaDriver) committedOffsets(group, topic string) (map[int32]int64, error) {
	ps, err := s.client.Partitions(topic)
	if err != nil {
		return nil, err
	}
	resp, err := s.admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		return nil, err
	}
	committed := map[int32]int64{}
	blocks := resp.Blocks[topic]    // OffsetFetch v0-7
	for _, g := range resp.Groups { // v8+
		if g.GroupId == group {
			blocks = g.Blocks[topic]
		}
	}
	for p, block := range blocks {
		committed[p] = block.Offset
	}
	return committed, nil
}

func (s *saramaDriver) checkCommitted(group, topic string) error {
	committed, err := s.committedOffsets(group, topic)
	if err != nil {
		return fmt.Errorf("the offsets of %s: %w", group, err)
	}
	ends, err := s.ends(topic)
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

// Txn: the transactional producer copies the input (read with a read_committed consumer) in
// chunks, each with AddOffsetsToTxn for the group. Every third chunk is first sent in a transaction
// that is aborted, then again in one that commits.
func (s *saramaDriver) Txn(ctx context.Context, o *Opts) error {
	in, outTopic := o.Topic+"-in", o.Topic+"-out"
	for _, t := range []string{in, outTopic} {
		if err := s.CreateTopic(ctx, t, o.Partitions, o.RF, nil); err != nil {
			return err
		}
	}
	input, err := s.Produce(ctx, "none", records(in, "in", o.Count, o.Partitions))
	if err != nil {
		return err
	}
	for _, r := range input {
		emitRec("input", r)
	}
	read, err := s.ReadAll(ctx, in, o.Partitions, true, o.Quiet)
	if err != nil {
		return err
	}
	cfg := s.config()
	cfg.ClientID = "sarama-txn"
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = o.Topic + "-txn"
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(s.o.Brokers, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	copies := 0
	send := func(n int, chunk []Rec, commit bool) error {
		if err := p.BeginTxn(); err != nil {
			return fmt.Errorf("begin %d: %w", n, err)
		}
		var msgs []*sarama.ProducerMessage
		next := map[int32]int64{}
		var values []string
		for _, r := range chunk {
			out := r
			out.Topic, out.Value = outTopic, "t-"+r.Value
			msgs = append(msgs, toSarama(out))
			next[r.Partition] = r.Offset + 1
			values = append(values, fmt.Sprintf("%d:%d:%s", r.Partition, r.Offset, r.Value))
		}
		if err := p.SendMessages(msgs); err != nil {
			return fmt.Errorf("send in %d: %w", n, err)
		}
		offsets := map[string][]*sarama.PartitionOffsetMetadata{}
		for part, off := range next {
			offsets[in] = append(offsets[in], &sarama.PartitionOffsetMetadata{Partition: part, Offset: off, LeaderEpoch: -1})
		}
		if err := p.AddOffsetsToTxn(offsets, o.Group); err != nil {
			return fmt.Errorf("add offsets in %d: %w", n, err)
		}
		end := p.CommitTxn
		if !commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			return fmt.Errorf("end %d (commit %v): %w", n, commit, err)
		}
		copies += len(chunk)
		emit("txn", "n", n, "abort", !commit, "committed", commit, "records", values)
		return nil
	}
	n := 1
	for i, k := 0, 0; i < len(read); i, k = i+13, k+1 {
		chunk := read[i:min(i+13, len(read))]
		if k%3 == 1 {
			if err := send(n, chunk, false); err != nil {
				return err
			}
			n++
		}
		if err := send(n, chunk, true); err != nil {
			return err
		}
		n++
	}
	return s.checkCopies(ctx, o, input, outTopic, copies)
}

func (s *saramaDriver) checkCopies(ctx context.Context, o *Opts, input []Rec, outTopic string, copies int) error {
	readCommitted, err := s.ReadAll(ctx, outTopic, o.Partitions, true, o.Quiet)
	if err != nil {
		return err
	}
	for _, r := range readCommitted {
		emitRec("read_committed", r)
	}
	readUncommitted, err := s.ReadAll(ctx, outTopic, o.Partitions, false, o.Quiet)
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
	return s.checkCommitted(o.Group, input[0].Topic)
}

// --- admin ----------------------------------------------------------------------------------------

func (s *saramaDriver) Admin(ctx context.Context, o *Opts) error {
	a, b := o.Topic+"-a", o.Topic+"-b"
	brokers, controller, err := s.admin.DescribeCluster()
	if err != nil {
		return fmt.Errorf("describe cluster: %w", err)
	}
	var ids []int32
	for _, br := range brokers {
		ids = append(ids, br.ID())
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	emit("brokers", "ids", ids, "controller", controller)

	retention := "3600000"
	for _, t := range []string{a, b} {
		err := s.admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: int32(o.Partitions),
			ReplicationFactor: int16(o.RF), ConfigEntries: map[string]*string{"retention.ms": &retention}}, false)
		emit("created", "topic", t, "error", errText(err))
	}
	err = s.admin.CreateTopic(a, &sarama.TopicDetail{NumPartitions: int32(o.Partitions), ReplicationFactor: int16(o.RF)}, false)
	emit("created_again", "topic", a, "error", errText(err), "already_exists", errors.Is(err, sarama.ErrTopicAlreadyExists))
	for _, t := range []string{a, b} {
		if err := s.waitTopic(ctx, t, o.Partitions); err != nil {
			return err
		}
	}
	listed, err := s.admin.ListTopics()
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	for _, t := range []string{a, b} {
		d, ok := listed[t]
		var retention *string
		if ok {
			retention = d.ConfigEntries["retention.ms"]
		}
		emit("listed_topics", "topic", t, "listed", ok, "partitions", d.NumPartitions,
			"replication_factor", d.ReplicationFactor, "retention_ms", retention)
	}
	if err := s.emitTopics("listed", a, b); err != nil {
		return err
	}

	if err := s.emitConfigs("initial", a); err != nil {
		return err
	}
	compact := "compact"
	err = s.admin.IncrementalAlterConfig(sarama.TopicResource, a, map[string]sarama.IncrementalAlterConfigsEntry{
		"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &compact},
		"retention.ms":   {Operation: sarama.IncrementalAlterConfigsOperationDelete},
	}, false)
	emit("altered", "how", "incremental", "topic", a, "error", errText(err))
	if err := s.emitConfigs("after_incremental", a); err != nil {
		return err
	}
	maxBytes := "200000"
	err = s.admin.AlterConfig(sarama.TopicResource, b, map[string]*string{"max.message.bytes": &maxBytes}, false)
	emit("altered", "how", "state", "topic", b, "error", errText(err))
	if err := s.emitConfigs("after_state", b); err != nil {
		return err
	}

	err = s.admin.CreatePartitions(b, int32(o.Partitions+2), nil, false)
	emit("partitions_created", "topic", b, "error", errText(err))
	if err := s.waitTopic(ctx, b, o.Partitions+2); err != nil {
		return err
	}
	if err := s.emitTopics("listed_grown", b); err != nil {
		return err
	}

	base := time.Now().Add(-time.Minute).UnixMilli()
	acked, err := s.Produce(ctx, "none", timed(records(a, "adm", o.Count, o.Partitions), base))
	if err != nil {
		return err
	}
	emit("produced", "topic", a, "records", len(acked), "base_timestamp", base)
	kinds := []struct {
		name string
		at   int64
	}{{"start", sarama.OffsetOldest}, {"end", sarama.OffsetNewest}, {"after_start", base - 1000},
		{"after_mid", base + 15}, {"after_end", time.Now().Add(time.Hour).UnixMilli()}}
	for _, k := range kinds {
		offsets := map[int32]int64{}
		var errs []string
		for p := 0; p < o.Partitions; p++ {
			off, err := s.client.GetOffset(a, int32(p), k.at)
			offsets[int32(p)] = off
			if err != nil {
				errs = append(errs, fmt.Sprintf("%d: %v", p, err))
			}
		}
		emit("offsets", "kind", k.name, "topic", a, "offsets", offsets, "errors", errs)
	}

	// one member that consumed everything and committed, while the group is listed and described
	m, err := s.member(ctx, a, o.Group, "admin")
	if err != nil {
		return err
	}
	defer m.cg.Close()
	if err := waitFor(ctx, "the member to consume everything", 50*time.Millisecond, func() bool {
		_, n := m.state()
		return n >= len(acked)
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, "the group's commits", 100*time.Millisecond, func() bool {
		c, err := s.committedOffsets(o.Group, a)
		if err != nil {
			return false
		}
		total := int64(0)
		for _, off := range c {
			total += off
		}
		return total == int64(len(acked))
	}); err != nil {
		return err
	}
	groups, err := s.admin.ListConsumerGroups()
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	var names []string
	for g, protocolType := range groups {
		if strings.HasPrefix(g, o.Topic) {
			names = append(names, g)
			emit("group_listed", "group", g, "protocol_type", protocolType)
		}
	}
	sort.Strings(names)
	emit("groups", "groups", names)
	if err := s.describeGroup(o.Group, a); err != nil {
		return err
	}
	if err := s.checkCommitted(o.Group, a); err != nil {
		return err
	}
	if err := m.cg.Close(); err != nil { // leaves the group: Empty, with its offsets
		return err
	}
	err = s.admin.DeleteConsumerGroup(o.Group)
	emit("group_deleted", "group", o.Group, "error", errText(err))
	groups, err = s.admin.ListConsumerGroups()
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	_, has := groups[o.Group]
	emit("groups_after_delete", "has_group", has)

	for _, t := range []string{a, b} {
		err := s.admin.DeleteTopic(t)
		emit("deleted", "topic", t, "error", errText(err))
	}
	if err := waitFor(ctx, "the deleted topics to go", 100*time.Millisecond, func() bool {
		l, err := s.admin.ListTopics()
		_, hasA := l[a]
		_, hasB := l[b]
		return err == nil && !hasA && !hasB
	}); err != nil {
		return err
	}
	emit("listed_after_delete", "has_a", false, "has_b", false)
	return nil
}

func (s *saramaDriver) emitTopics(event string, topics ...string) error {
	mds, err := s.admin.DescribeTopics(topics)
	if err != nil {
		return fmt.Errorf("describe topics: %w", err)
	}
	for _, md := range mds {
		var ps []partitionInfo
		for _, p := range md.Partitions {
			ps = append(ps, partitionInfo{p.ID, p.Leader, p.Replicas, p.Isr})
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
		var topicErr error
		if !errors.Is(md.Err, sarama.ErrNoError) {
			topicErr = md.Err
		}
		emit(event, "topic", md.Name, "error", errText(topicErr), "internal", md.IsInternal, "partitions", ps)
	}
	return nil
}

func (s *saramaDriver) emitConfigs(stage, topic string) error {
	entries, err := s.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return fmt.Errorf("describe configs of %s: %w", topic, err)
	}
	configs := map[string]map[string]string{}
	for _, c := range entries {
		switch c.Name {
		case "retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes":
			configs[c.Name] = map[string]string{"value": c.Value, "source": saramaSource(c.Source)}
		}
	}
	emit("configs", "stage", stage, "topic", topic, "count", len(entries), "configs", configs)
	return nil
}

// saramaSource names a config source as Kafka (and kmsg) does.
func saramaSource(s sarama.ConfigSource) string {
	switch s {
	case sarama.SourceTopic:
		return "DYNAMIC_TOPIC_CONFIG"
	case sarama.SourceDynamicBroker:
		return "DYNAMIC_BROKER_CONFIG"
	case sarama.SourceDynamicDefaultBroker:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case sarama.SourceStaticBroker:
		return "STATIC_BROKER_CONFIG"
	case sarama.SourceDefault:
		return "DEFAULT_CONFIG"
	}
	return "UNKNOWN"
}

// --- produce until stopped ------------------------------------------------------------------------

// Stream: an idempotent acks=all AsyncProducer writing v-<i> to partition i % partitions.
func (s *saramaDriver) Stream(ctx, stop context.Context, o *Opts) error {
	cfg := s.config()
	cfg.ClientID = "sarama-stream"
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 100
	cfg.Producer.Retry.Backoff = 250 * time.Millisecond
	cfg.Producer.Return.Errors = true
	p, err := sarama.NewAsyncProducer(s.o.Brokers, cfg)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var acked, failed int
	var mu sync.Mutex
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			mu.Lock()
			acked++
			mu.Unlock()
			emitRec("ack", fromSaramaProduced(m))
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			mu.Lock()
			failed++
			mu.Unlock()
			emitRec("failed", fromSaramaProduced(e.Msg), "error", e.Err.Error())
		}
	}()
	sent := 0
loop:
	for ; ctx.Err() == nil; sent++ {
		msg := toSarama(Rec{Topic: o.Topic, Partition: int32(sent % o.Partitions), Key: fmt.Sprintf("k-%d", sent),
			Value: fmt.Sprintf("v-%d", sent), Offset: -1})
		select {
		case p.Input() <- msg:
		case <-stop.Done():
			break loop
		}
		select {
		case <-stop.Done():
			sent++
			break loop
		case <-time.After(o.Interval):
		}
	}
	p.AsyncClose() // what is in flight is still delivered (or fails) before the channels close
	wg.Wait()
	emit("stopped", "sent", sent, "acked", acked, "failed", failed)
	return nil
}
