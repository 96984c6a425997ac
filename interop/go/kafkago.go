package main

// kafka-go (github.com/segmentio/kafka-go): Writer, Reader (by partition, and with GroupID) and the
// admin calls of kafka.Client. kafka-go has no transactional or idempotent producer, so it has no
// txn scenario, and its fault-test producer does not retry (see Stream).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

type kafkaGo struct {
	o         *Opts
	transport *kafka.Transport
	client    *kafka.Client
}

func newKafkaGo(o *Opts) (*kafkaGo, error) {
	t := &kafka.Transport{ClientID: "kafka-go", MetadataTTL: time.Second, DialTimeout: 5 * time.Second}
	return &kafkaGo{o: o, transport: t, client: &kafka.Client{Addr: kafka.TCP(o.Brokers...), Timeout: 15 * time.Second,
		Transport: t}}, nil
}

func (k *kafkaGo) Close() { k.transport.CloseIdleConnections() }

func (k *kafkaGo) logger(prefix string) kafka.Logger {
	if !k.o.Verbose {
		return nil
	}
	return log.New(os.Stderr, prefix, log.Lmicroseconds)
}

func kafkaGoCodec(name string) (kafka.Compression, error) {
	switch name {
	case "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("unknown codec %q", name)
}

func fromKafkaGo(m kafka.Message) Rec {
	return Rec{Topic: m.Topic, Partition: int32(m.Partition), Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)}
}

func toKafkaGo(r Rec) kafka.Message {
	m := kafka.Message{Topic: r.Topic, Partition: int(r.Partition), Key: []byte(r.Key), Value: []byte(r.Value)}
	if r.Time != 0 {
		m.Time = time.UnixMilli(r.Time)
	}
	return m
}

func (k *kafkaGo) CreateTopic(ctx context.Context, topic string, partitions, rf int, configs map[string]string) error {
	var entries []kafka.ConfigEntry
	for name, v := range configs {
		entries = append(entries, kafka.ConfigEntry{ConfigName: name, ConfigValue: v})
	}
	resp, err := k.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic,
		NumPartitions: partitions, ReplicationFactor: rf, ConfigEntries: entries}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		return err
	}
	return k.waitTopic(ctx, topic, partitions)
}

func (k *kafkaGo) metadata(ctx context.Context, topics ...string) (*kafka.MetadataResponse, error) {
	req := &kafka.MetadataRequest{Topics: topics}
	return k.client.Metadata(ctx, req)
}

func (k *kafkaGo) waitTopic(ctx context.Context, topic string, partitions int) error {
	return waitFor(ctx, "the leaders of "+topic, 100*time.Millisecond, func() bool {
		md, err := k.metadata(ctx, topic)
		if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) != partitions {
			return false
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Error != nil || p.Leader.ID < 0 || p.Leader.Host == "" {
				return false
			}
		}
		return true
	})
}

// writer: a Writer that sends each message to the partition it names.
func (k *kafkaGo) writer(codec kafka.Compression, maxAttempts int, completion func([]kafka.Message, error)) *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP(k.o.Brokers...), Transport: k.transport, RequiredAcks: kafka.RequireAll,
		Compression: codec, BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, MaxAttempts: maxAttempts,
		WriteBackoffMin: 100 * time.Millisecond, WriteBackoffMax: 500 * time.Millisecond,
		Balancer:   kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }),
		Completion: completion, Logger: k.logger("[kafka-go writer] "), ErrorLogger: k.logger("[kafka-go writer] ")}
}

func (k *kafkaGo) Produce(ctx context.Context, codec string, recs []Rec) ([]Rec, error) {
	c, err := kafkaGoCodec(codec)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	offsets := map[string]int64{} // by key
	w := k.writer(c, 10, func(ms []kafka.Message, err error) {
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			offsets[string(m.Key)] = m.Offset
		}
	})
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = toKafkaGo(r)
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	acked := make([]Rec, len(recs))
	for i, r := range recs {
		off, ok := offsets[r.Key]
		if !ok {
			return nil, fmt.Errorf("no offset reported for %s", r.Key)
		}
		acked[i] = r
		acked[i].Offset = off
	}
	return acked, nil
}

func (k *kafkaGo) ends(ctx context.Context, topic string, partitions int, committed bool) (map[int32]int64, error) {
	var reqs []kafka.OffsetRequest
	for p := 0; p < partitions; p++ {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	isolation := kafka.ReadUncommitted
	if committed {
		isolation = kafka.ReadCommitted
	}
	resp, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs},
		IsolationLevel: isolation})
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("the end of %s[%d]: %w", topic, po.Partition, po.Error)
		}
		ends[int32(po.Partition)] = po.LastOffset
	}
	return ends, nil
}

func (k *kafkaGo) ReadAll(ctx context.Context, topic string, partitions int, committed bool, quiet time.Duration) ([]Rec, error) {
	var ends map[int32]int64
	if err := retry(ctx, "list the end offsets of "+topic, func() (err error) {
		ends, err = k.ends(ctx, topic, partitions, committed)
		if err == nil && len(ends) != partitions {
			err = fmt.Errorf("%d partitions listed, want %d", len(ends), partitions)
		}
		return err
	}); err != nil {
		return nil, err
	}
	isolation := kafka.ReadUncommitted
	if committed {
		isolation = kafka.ReadCommitted
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rd := newReader(ends)
	var wg sync.WaitGroup
	for p := range ends {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.o.Brokers, Topic: topic, Partition: int(p), MinBytes: 1,
			MaxBytes: 1 << 20, MaxWait: 250 * time.Millisecond, IsolationLevel: isolation,
			Logger: k.logger("[kafka-go reader] "), ErrorLogger: k.logger("[kafka-go reader] ")})
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				m, err := r.ReadMessage(rctx)
				if err != nil {
					if rctx.Err() == nil {
						logf("kafka-go reader %s[%d]: %v", topic, p, err)
					}
					return
				}
				rd.add(fromKafkaGo(m))
			}
		}()
	}
	err := waitFor(ctx, "reading "+topic, 50*time.Millisecond, func() bool { return rd.complete(quiet) })
	cancel()
	wg.Wait()
	return rd.records(), err
}

// --- group ----------------------------------------------------------------------------------------

type kafkaGoMember struct {
	name     string
	r        *kafka.Reader
	mu       sync.Mutex
	consumed []Rec
	done     chan struct{}
}

func (m *kafkaGoMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.consumed)
}

func (k *kafkaGo) member(ctx context.Context, topic, group, name string) *kafkaGoMember {
	m := &kafkaGoMember{name: name, done: make(chan struct{})}
	m.r = kafka.NewReader(kafka.ReaderConfig{Brokers: k.o.Brokers, GroupID: group, Topic: topic, MinBytes: 1,
		MaxBytes: 1 << 20, MaxWait: 250 * time.Millisecond, StartOffset: kafka.FirstOffset,
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 500 * time.Millisecond, CommitInterval: 0,
		GroupBalancers: []kafka.GroupBalancer{kafka.RoundRobinGroupBalancer{}},
		Dialer:         &kafka.Dialer{ClientID: "kafka-go-" + name, Timeout: 10 * time.Second},
		Logger:         k.logger("[kafka-go " + name + "] "), ErrorLogger: k.logger("[kafka-go " + name + "] ")})
	go func() {
		defer close(m.done)
		for {
			msg, err := m.r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, io.EOF) {
					logf("kafka-go member %s: %v", name, err)
				}
				return
			}
			r := fromKafkaGo(msg)
			m.mu.Lock()
			m.consumed = append(m.consumed, r)
			m.mu.Unlock()
			emitRec("record", r, "member", name)
			if err := m.r.CommitMessages(ctx, msg); err != nil && ctx.Err() == nil {
				problem("member %s: commit: %v", name, err)
			}
		}
	}()
	return m
}

type kafkaGoGroupMember struct {
	MemberID   string  `json:"member_id"`
	ClientID   string  `json:"client_id"`
	Partitions []int32 `json:"partitions"`
}

// describe: the coordinator's view of the group (DescribeGroups), members by client id.
func (k *kafkaGo) describe(ctx context.Context, group, topic string) (string, []kafkaGoGroupMember, error) {
	resp, err := k.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return "", nil, err
	}
	if len(resp.Groups) != 1 {
		return "", nil, fmt.Errorf("%d groups described", len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.Error != nil {
		return "", nil, g.Error
	}
	var members []kafkaGoGroupMember
	for _, m := range g.Members {
		var ps []int32
		for _, t := range m.MemberAssignments.Topics {
			if t.Topic == topic {
				for _, p := range t.Partitions {
					ps = append(ps, int32(p))
				}
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		members = append(members, kafkaGoGroupMember{m.MemberID, m.ClientID, ps})
	}
	sort.Slice(members, func(i, j int) bool { return members[i].ClientID < members[j].ClientID })
	return g.GroupState, members, nil
}

// assignments: what the coordinator says each of our members (by client id) holds.
func assignments(members []kafkaGoGroupMember, names ...string) [][]int32 {
	out := make([][]int32, len(names))
	for i, n := range names {
		for _, m := range members {
			if m.ClientID == "kafka-go-"+n {
				out[i] = m.Partitions
			}
		}
	}
	return out
}

func (k *kafkaGo) Group(ctx context.Context, o *Opts) error {
	if err := k.CreateTopic(ctx, o.Topic, o.Partitions, o.RF, nil); err != nil {
		return err
	}
	current := func(names ...string) [][]int32 {
		state, members, err := k.describe(ctx, o.Group, o.Topic)
		if err != nil || state != "Stable" {
			return make([][]int32, len(names))
		}
		return assignments(members, names...)
	}
	a := k.member(ctx, o.Topic, o.Group, "a")
	defer a.r.Close()
	if err := waitFor(ctx, "member a to have every partition", 100*time.Millisecond, func() bool {
		return len(current("a")[0]) == o.Partitions
	}); err != nil {
		return err
	}
	emit("assignment", "member", "a", "partitions", current("a")[0], "stage", "alone")
	b := k.member(ctx, o.Topic, o.Group, "b")
	defer b.r.Close()
	if err := waitSplit(ctx, o.Partitions, func() [][]int32 { return current("a", "b") }); err != nil {
		return err
	}
	acked, err := k.Produce(ctx, "none", records(o.Topic, "g", o.Count, o.Partitions))
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
	time.Sleep(o.Quiet)
	state, members, err := k.describe(ctx, o.Group, o.Topic)
	if err != nil {
		return fmt.Errorf("describe group: %w", err)
	}
	emit("described", "group", o.Group, "state", state, "protocol_type", "consumer", "members", members)
	assigned, consumed := map[string][]int32{}, map[string][]Rec{}
	for i, m := range []*kafkaGoMember{a, b} {
		assigned[m.name] = assignments(members, "a", "b")[i]
		m.mu.Lock()
		consumed[m.name] = append([]Rec(nil), m.consumed...)
		m.mu.Unlock()
		emit("assignment", "member", m.name, "partitions", assigned[m.name], "stage", "end")
	}
	if err := k.checkCommitted(ctx, o.Group, o.Topic, o.Partitions); err != nil {
		return err
	}
	membersCheck(assigned, consumed, acked, o.Partitions)
	return nil
}

func (k *kafkaGo) committed(ctx context.Context, group, topic string, partitions int) (map[int32]int64, error) {
	var ps []int
	for p := 0; p < partitions; p++ {
		ps = append(ps, p)
	}
	resp, err := k.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		return nil, err
	}
	committed := map[int32]int64{}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return nil, p.Error
		}
		committed[int32(p.Partition)] = p.CommittedOffset
	}
	return committed, nil
}

func (k *kafkaGo) checkCommitted(ctx context.Context, group, topic string, partitions int) error {
	committed, err := k.committed(ctx, group, topic, partitions)
	if err != nil {
		return fmt.Errorf("the offsets of %s: %w", group, err)
	}
	ends, err := k.ends(ctx, topic, partitions, false)
	if err != nil {
		return err
	}
	emit("committed", "group", group, "topic", topic, "offsets", committed, "ends", ends)
	if fmt.Sprint(committed) != fmt.Sprint(ends) {
		problem("group %s committed %v, the ends of %s are %v", group, committed, topic, ends)
	}
	return nil
}

// --- admin ----------------------------------------------------------------------------------------

func (k *kafkaGo) Admin(ctx context.Context, o *Opts) error {
	a, b := o.Topic+"-a", o.Topic+"-b"
	md, err := k.metadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var ids []int
	for _, br := range md.Brokers {
		ids = append(ids, br.ID)
	}
	sort.Ints(ids)
	emit("brokers", "ids", ids, "controller", md.Controller.ID)

	created, err := k.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: a, NumPartitions: o.Partitions, ReplicationFactor: o.RF,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "3600000"}}},
		{Topic: b, NumPartitions: o.Partitions, ReplicationFactor: o.RF,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "3600000"}}},
	}})
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range []string{a, b} {
		emit("created", "topic", t, "error", errText(created.Errors[t]))
	}
	again, err := k.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: a, NumPartitions: o.Partitions, ReplicationFactor: o.RF}}})
	if err != nil {
		return err
	}
	emit("created_again", "topic", a, "error", errText(again.Errors[a]),
		"already_exists", errors.Is(again.Errors[a], kafka.TopicAlreadyExists))
	for _, t := range []string{a, b} {
		if err := k.waitTopic(ctx, t, o.Partitions); err != nil {
			return err
		}
	}
	if err := k.emitTopics(ctx, "listed", a, b); err != nil {
		return err
	}

	if err := k.emitConfigs(ctx, "initial", a); err != nil {
		return err
	}
	inc, err := k.client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: a,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{
				{Name: "cleanup.policy", Value: "compact", ConfigOperation: kafka.ConfigOperationSet},
				{Name: "retention.ms", ConfigOperation: kafka.ConfigOperationDelete},
			}}}})
	if err != nil {
		return fmt.Errorf("incremental alter configs: %w", err)
	}
	for _, r := range inc.Resources {
		emit("altered", "how", "incremental", "topic", r.ResourceName, "error", errText(r.Error))
	}
	if err := k.emitConfigs(ctx, "after_incremental", a); err != nil {
		return err
	}
	alt, err := k.client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: b,
			Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: "200000"}}}}})
	if err != nil {
		return fmt.Errorf("alter configs: %w", err)
	}
	for r, e := range alt.Errors {
		emit("altered", "how", "state", "topic", r.Name, "error", errText(e))
	}
	if err := k.emitConfigs(ctx, "after_state", b); err != nil {
		return err
	}

	grown, err := k.client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{
		{Name: b, Count: int32(o.Partitions + 2)}}})
	if err != nil {
		return fmt.Errorf("create partitions: %w", err)
	}
	emit("partitions_created", "topic", b, "error", errText(grown.Errors[b]))
	if err := k.waitTopic(ctx, b, o.Partitions+2); err != nil {
		return err
	}
	if err := k.emitTopics(ctx, "listed_grown", b); err != nil {
		return err
	}

	base := time.Now().Add(-time.Minute).UnixMilli()
	acked, err := k.Produce(ctx, "none", timed(records(a, "adm", o.Count, o.Partitions), base))
	if err != nil {
		return err
	}
	emit("produced", "topic", a, "records", len(acked), "base_timestamp", base)
	kinds := []struct {
		name string
		req  func(int) kafka.OffsetRequest
	}{
		{"start", kafka.FirstOffsetOf},
		{"end", kafka.LastOffsetOf},
		{"after_start", func(p int) kafka.OffsetRequest { return kafka.TimeOffsetOf(p, time.UnixMilli(base-1000)) }},
		{"after_mid", func(p int) kafka.OffsetRequest { return kafka.TimeOffsetOf(p, time.UnixMilli(base+15)) }},
		{"after_end", func(p int) kafka.OffsetRequest { return kafka.TimeOffsetOf(p, time.Now().Add(time.Hour)) }},
	}
	for _, kind := range kinds {
		var reqs []kafka.OffsetRequest
		for p := 0; p < o.Partitions; p++ {
			reqs = append(reqs, kind.req(p))
		}
		resp, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{a: reqs}})
		if err != nil {
			return fmt.Errorf("list %s offsets: %w", kind.name, err)
		}
		offsets := map[int32]int64{}
		var errs []string
		for _, po := range resp.Topics[a] {
			if po.Error != nil {
				errs = append(errs, fmt.Sprintf("%d: %v", po.Partition, po.Error))
			}
			switch kind.name {
			case "start":
				offsets[int32(po.Partition)] = po.FirstOffset
			case "end":
				offsets[int32(po.Partition)] = po.LastOffset
			default: // by time: the answer's one offset
				offsets[int32(po.Partition)] = -1
				for off := range po.Offsets {
					offsets[int32(po.Partition)] = off
				}
			}
		}
		emit("offsets", "kind", kind.name, "topic", a, "offsets", offsets, "errors", errs)
	}

	m := k.member(ctx, a, o.Group, "admin")
	defer m.r.Close()
	if err := waitFor(ctx, "the member to consume everything", 50*time.Millisecond, func() bool {
		return m.count() >= len(acked)
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, "the group's commits", 100*time.Millisecond, func() bool {
		c, err := k.committed(ctx, o.Group, a, o.Partitions)
		total := int64(0)
		for _, off := range c {
			total += off
		}
		return err == nil && total == int64(len(acked))
	}); err != nil {
		return err
	}
	groups, err := k.client.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err == nil {
		err = groups.Error
	}
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	var names []string
	for _, g := range groups.Groups {
		if strings.HasPrefix(g.GroupID, o.Topic) {
			names = append(names, g.GroupID)
			emit("group_listed", "group", g.GroupID, "protocol_type", g.ProtocolType)
		}
	}
	sort.Strings(names)
	emit("groups", "groups", names)
	state, members, err := k.describe(ctx, o.Group, a)
	if err != nil {
		return fmt.Errorf("describe group: %w", err)
	}
	emit("described", "group", o.Group, "state", state, "protocol_type", "consumer", "members", members)
	if err := k.checkCommitted(ctx, o.Group, a, o.Partitions); err != nil {
		return err
	}
	if err := m.r.Close(); err != nil { // leaves the group: Empty, with its offsets
		return err
	}
	gone, err := k.client.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{o.Group}})
	if err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	emit("group_deleted", "group", o.Group, "error", errText(gone.Errors[o.Group]))
	groups, err = k.client.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	has := false
	for _, g := range groups.Groups {
		has = has || g.GroupID == o.Group
	}
	emit("groups_after_delete", "has_group", has)

	deleted, err := k.client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{a, b}})
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	for _, t := range []string{a, b} {
		emit("deleted", "topic", t, "error", errText(deleted.Errors[t]))
	}
	if err := waitFor(ctx, "the deleted topics to go", 100*time.Millisecond, func() bool {
		md, err := k.metadata(ctx)
		if err != nil {
			return false
		}
		for _, t := range md.Topics {
			if t.Name == a || t.Name == b {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	emit("listed_after_delete", "has_a", false, "has_b", false)
	return nil
}

func (k *kafkaGo) emitTopics(ctx context.Context, event string, topics ...string) error {
	md, err := k.metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	ids := func(bs []kafka.Broker) []int32 {
		var out []int32
		for _, b := range bs {
			out = append(out, int32(b.ID))
		}
		return out
	}
	for _, t := range md.Topics {
		var ps []partitionInfo
		for _, p := range t.Partitions {
			ps = append(ps, partitionInfo{int32(p.ID), int32(p.Leader.ID), ids(p.Replicas), ids(p.Isr)})
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
		emit(event, "topic", t.Name, "error", errText(t.Error), "internal", t.Internal, "partitions", ps)
	}
	return nil
}

func (k *kafkaGo) emitConfigs(ctx context.Context, stage, topic string) error {
	resp, err := k.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}}})
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].Error != nil {
		return fmt.Errorf("describe configs of %s: %v", topic, resp.Resources)
	}
	entries := resp.Resources[0].ConfigEntries
	configs := map[string]map[string]string{}
	for _, c := range entries {
		switch c.ConfigName {
		case "retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes":
			configs[c.ConfigName] = map[string]string{"value": c.ConfigValue, "source": configSourceName(c.ConfigSource)}
		}
	}
	emit("configs", "stage", stage, "topic", topic, "count", len(entries), "configs", configs)
	return nil
}

// configSourceName: DescribeConfigs' source codes by Kafka's names.
func configSourceName(code int8) string {
	names := map[int8]string{1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
		4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG",
		8: "GROUP_CONFIG"}
	if n, ok := names[code]; ok {
		return n
	}
	return "UNKNOWN"
}

// --- produce until stopped ------------------------------------------------------------------------

// Stream: a Writer (acks=all) sending one record per partition at a time, v-<i> to partition
// i % partitions. kafka-go's producer is not idempotent, so a retry after a lost answer would
// write a record twice; MaxAttempts 1 keeps "acknowledged means written once": a failed write is
// reported and not retried (it may or may not be in the log, at most once).
func (k *kafkaGo) Stream(ctx, stop context.Context, o *Opts) error {
	var mu sync.Mutex
	acked, failed := 0, 0
	w := k.writer(0, 1, func(ms []kafka.Message, err error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			if err != nil {
				failed++
				emitRec("failed", Rec{Topic: o.Topic, Partition: int32(m.Partition), Offset: -1, Key: string(m.Key),
					Value: string(m.Value)}, "error", err.Error())
			} else {
				acked++
				emitRec("ack", fromKafkaGo(m))
			}
		}
	})
	sent := 0
	for stop.Err() == nil && ctx.Err() == nil {
		msgs := make([]kafka.Message, o.Partitions)
		for i := range msgs {
			msgs[i] = toKafkaGo(Rec{Topic: o.Topic, Partition: int32(sent % o.Partitions),
				Key: fmt.Sprintf("k-%d", sent), Value: fmt.Sprintf("v-%d", sent)})
			sent++
		}
		err := w.WriteMessages(ctx, msgs...)
		var perMessage kafka.WriteErrors
		if err != nil && !errors.As(err, &perMessage) {
			// failed before any batch was sent (metadata, say): Completion was not called
			mu.Lock()
			for _, m := range msgs {
				failed++
				emitRec("failed", Rec{Topic: o.Topic, Partition: int32(m.Partition), Offset: -1, Key: string(m.Key),
					Value: string(m.Value)}, "error", err.Error())
			}
			mu.Unlock()
		}
		select {
		case <-stop.Done():
		case <-time.After(o.Interval):
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	emit("stopped", "sent", sent, "acked", acked, "failed", failed)
	return nil
}
