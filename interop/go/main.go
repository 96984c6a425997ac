// Command kafka-compat-go runs Kafka scenarios with the Go clients (franz-go, sarama, kafka-go)
// used as libraries, against the brokers named by -brokers, and prints what it observed as JSON
// lines on stdout: one object per line, each with an "event" field. interop/test_go_clients.py
// builds it (interop/go/build.sh) and asserts on those lines.
//
//	kafka-compat-go SCENARIO -client CLIENT -brokers HOST:PORT[,HOST:PORT...] [flags]
//
// Scenarios (not every client has every one; see scenarios below):
//
//	codecs  for each codec (none gzip snappy lz4 zstd): create PREFIX-CODEC, produce -count records
//	        over -partitions partitions, read them back from the start; every record once, in order
//	group   two members of one consumer group: the partitions are split between them, then every
//	        record produced is consumed exactly once and the group's committed offsets are the ends
//	txn     transactions: commits and aborts, read back with read_committed and read_uncommitted
//	admin   the client's admin API: topics, configs, partitions, groups, offsets
//	produce an acks=all producer writing until SIGTERM, printing every acknowledgement (fault tests)
//	consume everything in -topic from the start to its end offsets
//
// Events every scenario may print: {"event":"error","error":...} (the scenario could not run),
// {"event":"problem","problem":...} (a check failed) and last {"event":"done","ok":...}. The exit
// status is 0 when ok, 1 when a check failed or an error stopped the scenario, 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Codecs in the order the codecs scenario runs them.
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Opts are the flags every scenario shares.
type Opts struct {
	Client     string
	Brokers    []string
	Topic      string // the topic (or the prefix of the topics) the scenario uses
	Group      string
	Partitions int
	RF         int
	Count      int
	Codecs     []string
	Protocol   string // group: classic or consumer (KIP-848)
	Isolation  string // consume: read_committed or read_uncommitted
	Interval   time.Duration
	Quiet      time.Duration
	Timeout    time.Duration
	Create     bool // produce: create the topic first
	Verbose    bool
}

// Rec is a record as produced or consumed.
type Rec struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Time      int64  `json:"-"` // the timestamp to produce with, in ms (0: the client's clock)
}

// --- output -------------------------------------------------------------------------------------

var (
	outMu    sync.Mutex
	out      = json.NewEncoder(os.Stdout)
	problems []string
)

// emit prints one JSON line: the event name followed by the fields, given as name, value pairs.
func emit(event string, kv ...any) {
	m := map[string]any{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(m)
}

func emitRec(event string, r Rec, kv ...any) {
	emit(event, append([]any{"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", r.Key,
		"value", r.Value}, kv...)...)
}

// problem records a failed check: it is printed at once and makes the exit status 1.
func problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	outMu.Lock()
	problems = append(problems, msg)
	outMu.Unlock()
	emit("problem", "problem", msg)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// --- checks -------------------------------------------------------------------------------------

// checkReadBack compares what was acknowledged with what a consumer read: every acknowledged record
// read exactly once, at its offset, and per partition in the order it was produced (the order of
// `acked` within a partition). It returns how many problems it reported.
func checkReadBack(what string, acked, got []Rec) int {
	n := 0
	byOffset := map[[2]int64]Rec{}
	last := map[int32]int64{}
	seen := map[string]bool{}
	for _, r := range got {
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			problem("%s: partition %d read offset %d after %d", what, r.Partition, r.Offset, prev)
			n++
		}
		last[r.Partition] = r.Offset
		id := fmt.Sprintf("%d/%s", r.Partition, r.Value)
		if seen[id] {
			problem("%s: %q read twice from partition %d", what, r.Value, r.Partition)
			n++
		}
		seen[id] = true
		byOffset[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	for _, a := range acked {
		r, ok := byOffset[[2]int64{int64(a.Partition), a.Offset}]
		switch {
		case !ok:
			problem("%s: acknowledged %q at %d:%d was not read back", what, a.Value, a.Partition, a.Offset)
			n++
		case r.Value != a.Value || r.Key != a.Key:
			problem("%s: at %d:%d acknowledged %q=%q, read %q=%q", what, a.Partition, a.Offset, a.Key, a.Value,
				r.Key, r.Value)
			n++
		}
	}
	if len(got) != len(acked) {
		problem("%s: %d records acknowledged, %d read back", what, len(acked), len(got))
		n++
	}
	// the order they were sent in is the order of the offsets they were given
	sent := map[int32][]Rec{}
	for _, a := range acked {
		sent[a.Partition] = append(sent[a.Partition], a)
	}
	for p, rs := range sent {
		for i := 1; i < len(rs); i++ {
			if rs[i].Offset <= rs[i-1].Offset {
				problem("%s: partition %d: %q was sent after %q but has offset %d <= %d", what, p, rs[i].Value,
					rs[i-1].Value, rs[i].Offset, rs[i-1].Offset)
				n++
				break
			}
		}
	}
	return n
}

// records builds count records for topic: record i goes to partition i % partitions, key k-i and
// value PREFIX-i.
func records(topic, prefix string, count, partitions int) []Rec {
	recs := make([]Rec, count)
	for i := range recs {
		recs[i] = Rec{Topic: topic, Partition: int32(i % partitions), Offset: -1, Key: fmt.Sprintf("k-%d", i),
			Value: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return recs
}

// padded: the records with a tail on each value that compresses well, so that every codec really
// has something to do.
func padded(recs []Rec) []Rec {
	for i := range recs {
		recs[i].Value += "|" + strings.Repeat("abcdefgh", 8)
	}
	return recs
}

// timed: the records with timestamps base, base+1ms, ... in the order given.
func timed(recs []Rec, base int64) []Rec {
	for i := range recs {
		recs[i].Time = base + int64(i)
	}
	return recs
}

func sortRecs(rs []Rec) {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Partition != rs[j].Partition {
			return rs[i].Partition < rs[j].Partition
		}
		return rs[i].Offset < rs[j].Offset
	})
}

// --- what each client implements ----------------------------------------------------------------

// Driver is one client library. ReadAll reads every partition of topic from its start until the
// partition's end offset (high watermark, or last stable offset when committed) is reached, or no
// record came for quiet: a read_committed reader never sees the offsets of transaction markers.
type Driver interface {
	CreateTopic(ctx context.Context, topic string, partitions, rf int, configs map[string]string) error
	Produce(ctx context.Context, codec string, recs []Rec) ([]Rec, error)
	ReadAll(ctx context.Context, topic string, partitions int, committed bool, quiet time.Duration) ([]Rec, error)
	Close()
}

// Scenario functions a client may have beyond the generic ones.
type (
	grouper interface {
		Group(ctx context.Context, o *Opts) error
	}
	transacter interface {
		Txn(ctx context.Context, o *Opts) error
	}
	adminer interface {
		Admin(ctx context.Context, o *Opts) error
	}
	streamer interface {
		// Stream produces until stop is done, then waits for what is in flight (within ctx).
		Stream(ctx, stop context.Context, o *Opts) error
	}
)

func newDriver(o *Opts) (Driver, error) {
	switch o.Client {
	case "franz-go":
		return newFranz(o)
	case "sarama":
		return newSarama(o)
	case "kafka-go":
		return newKafkaGo(o)
	}
	return nil, fmt.Errorf("unknown client %q (franz-go, sarama, kafka-go)", o.Client)
}

// --- generic scenarios --------------------------------------------------------------------------

func runCodecs(ctx context.Context, d Driver, o *Opts) error {
	for _, codec := range o.Codecs {
		topic := o.Topic + "-" + codec
		if err := d.CreateTopic(ctx, topic, o.Partitions, o.RF, nil); err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
		sent := padded(records(topic, codec, o.Count, o.Partitions))
		acked, err := d.Produce(ctx, codec, sent)
		if err != nil {
			return fmt.Errorf("produce with %s: %w", codec, err)
		}
		for _, r := range acked {
			emitRec("ack", r, "codec", codec)
		}
		got, err := d.ReadAll(ctx, topic, o.Partitions, false, o.Quiet)
		if err != nil {
			return fmt.Errorf("read back %s: %w", topic, err)
		}
		for _, r := range got {
			emitRec("record", r, "codec", codec)
		}
		bad := checkReadBack(codec, acked, got)
		emit("codec", "codec", codec, "topic", topic, "acked", len(acked), "read", len(got), "ok", bad == 0)
	}
	return nil
}

func runConsume(ctx context.Context, d Driver, o *Opts) error {
	got, err := d.ReadAll(ctx, o.Topic, o.Partitions, o.Isolation == "read_committed", o.Quiet)
	if err != nil {
		return err
	}
	for _, r := range got {
		emitRec("record", r)
	}
	emit("read", "topic", o.Topic, "records", len(got))
	return nil
}

// --- main ---------------------------------------------------------------------------------------

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kafka-compat-go codecs|group|txn|admin|produce|consume -client franz-go|sarama|kafka-go -brokers HOST:PORT,... [flags]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		usage()
	}
	scenario := os.Args[1]
	o := &Opts{}
	fs := flag.NewFlagSet(scenario, flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	codecs := fs.String("codecs", strings.Join(Codecs, ","), "codecs scenario: the codecs to run")
	fs.StringVar(&o.Client, "client", "franz-go", "franz-go, sarama or kafka-go")
	fs.StringVar(&o.Topic, "topic", "go-"+scenario, "the topic (codecs: the prefix of its topics)")
	fs.StringVar(&o.Group, "group", "", "the consumer group (default: the topic's name with -group)")
	fs.IntVar(&o.Partitions, "partitions", 3, "partitions of the topics the scenario creates (consume: to read)")
	fs.IntVar(&o.RF, "rf", 1, "replication factor of the topics the scenario creates")
	fs.IntVar(&o.Count, "count", 100, "records to produce")
	fs.StringVar(&o.Protocol, "protocol", "classic", "group: the group protocol, classic or consumer (KIP-848)")
	fs.StringVar(&o.Isolation, "isolation", "read_uncommitted", "consume: read_committed or read_uncommitted")
	fs.DurationVar(&o.Interval, "interval", 5*time.Millisecond, "produce: pause between records")
	fs.DurationVar(&o.Quiet, "quiet", 1500*time.Millisecond, "a read ends when nothing more came for this long")
	fs.DurationVar(&o.Timeout, "timeout", 120*time.Second, "the whole scenario's limit")
	fs.BoolVar(&o.Create, "create", false, "produce: create -topic first (-partitions, -rf)")
	fs.BoolVar(&o.Verbose, "v", false, "the client library's log on stderr")
	_ = fs.Parse(os.Args[2:])
	o.Brokers = strings.Split(*brokers, ",")
	o.Codecs = strings.Split(*codecs, ",")
	if o.Group == "" {
		o.Group = o.Topic + "-group"
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	// SIGTERM ends `produce`'s writing (what is in flight is still awaited); elsewhere it cancels.
	stop, stopped := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stopped()
	if scenario != "produce" {
		go func() {
			<-stop.Done()
			cancel()
		}()
	}

	start := time.Now()
	err := run(ctx, stop, scenario, o)
	if err != nil {
		emit("error", "error", err.Error())
	}
	ok := err == nil && len(problems) == 0
	emit("done", "ok", ok, "scenario", scenario, "client", o.Client, "problems", len(problems),
		"seconds", time.Since(start).Seconds())
	if !ok {
		os.Exit(1)
	}
}

func run(ctx, stop context.Context, scenario string, o *Opts) error {
	d, err := newDriver(o)
	if err != nil {
		return err
	}
	defer d.Close()
	unsupported := fmt.Errorf("%s has no %s scenario", o.Client, scenario)
	switch scenario {
	case "codecs":
		return runCodecs(ctx, d, o)
	case "consume":
		return runConsume(ctx, d, o)
	case "group":
		if g, ok := d.(grouper); ok {
			return g.Group(ctx, o)
		}
	case "txn":
		if t, ok := d.(transacter); ok {
			return t.Txn(ctx, o)
		}
	case "admin":
		if a, ok := d.(adminer); ok {
			return a.Admin(ctx, o)
		}
	case "produce":
		if s, ok := d.(streamer); ok {
			if o.Create {
				if err := d.CreateTopic(ctx, o.Topic, o.Partitions, o.RF, nil); err != nil {
					return fmt.Errorf("create %s: %w", o.Topic, err)
				}
				emit("created", "topic", o.Topic)
			}
			return s.Stream(ctx, stop, o)
		}
	default:
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	return unsupported
}

// --- helpers the drivers share ------------------------------------------------------------------

// retry calls fn until it succeeds or ctx ends, pausing between attempts; the last error.
func retry(ctx context.Context, what string, fn func() error) error {
	var err error
	for {
		if err = fn(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, what string, every time.Duration, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
	return nil
}

// reader collects what a ReadAll sees and decides when it is complete.
type reader struct {
	mu     sync.Mutex
	got    []Rec
	ends   map[int32]int64
	done   map[int32]bool
	lastAt time.Time
}

func newReader(ends map[int32]int64) *reader {
	r := &reader{ends: ends, done: map[int32]bool{}, lastAt: time.Now()}
	for p, end := range ends {
		if end <= 0 {
			r.done[p] = true
		}
	}
	return r
}

func (r *reader) add(rec Rec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
	r.lastAt = time.Now()
	if rec.Offset+1 >= r.ends[rec.Partition] {
		r.done[rec.Partition] = true
	}
}

// complete: every partition read to its end, or nothing came for quiet.
func (r *reader) complete(quiet time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done) == len(r.ends) || time.Since(r.lastAt) > quiet
}

func (r *reader) records() []Rec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Rec(nil), r.got...) // as received: checkReadBack checks the order
}

// membersCheck reports the problems of a two-member group: partitions not split, not every record
// produced consumed exactly once, a record consumed by a member it was not assigned to.
func membersCheck(assigned map[string][]int32, consumed map[string][]Rec, acked []Rec, partitions int) {
	owner := map[int32]string{}
	for m, ps := range assigned {
		if len(ps) == 0 {
			problem("member %s has no partitions", m)
		}
		for _, p := range ps {
			if other, ok := owner[p]; ok {
				problem("partition %d assigned to both %s and %s", p, other, m)
			}
			owner[p] = m
		}
	}
	if len(owner) != partitions {
		problem("%d of %d partitions assigned: %v", len(owner), partitions, assigned)
	}
	var all []Rec
	for m, rs := range consumed {
		for _, r := range rs {
			if owner[r.Partition] != m {
				problem("member %s consumed %q from partition %d, assigned to %q", m, r.Value, r.Partition,
					owner[r.Partition])
			}
		}
		all = append(all, rs...) // a partition has one owner: its records stay in the order consumed
	}
	checkReadBack("group", acked, all)
}
