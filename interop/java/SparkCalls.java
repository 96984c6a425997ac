import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java client calls Spark's Kafka connector (spark-sql-kafka-0-10 4.0)
 * makes, made the way it makes them, so CI checks them without Spark itself.
 *
 * The driver plans offset ranges with the AdminClient (describeTopics, then
 * listOffsets earliest / latest / forTimestamp, read_uncommitted). Each task
 * reads one partition with its own consumer: a random group.id it never joins,
 * auto.offset.reset=none, assign + seek + poll, and after a poll it asks for
 * the available range with seekToBeginning/seekToEnd + position before seeking
 * back. Every command prints JSON lines on stdout and exits non-zero on failure.
 */
public final class SparkCalls {
    private static final String USAGE = String.join("\n",
        "usage: SparkCalls <command> --bootstrap HOST:PORT --topic T [options]",
        "  describe                                  AdminClient describeTopics",
        "  list-offsets --spec earliest|latest|MS    AdminClient listOffsets, every partition",
        "  delete-records --partition P --before O   AdminClient deleteRecords",
        "  read --partition P --from O --until O [--skip-lost] [--max-poll-records N]",
        "       a task's read: assign/seek/poll; seekToBeginning/seekToEnd + position after every poll");

    private final Map<String, String> opts = new HashMap<>();
    private final List<String> positional = new ArrayList<>();

    private SparkCalls(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--")) {
                boolean flag = i + 1 >= args.length || args[i + 1].startsWith("--");
                opts.put(a.substring(2), flag ? "true" : args[++i]);
            } else {
                positional.add(a);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        SparkCalls s = new SparkCalls(args);
        int rc;
        switch (s.positional.isEmpty() ? "" : s.positional.get(0)) {
            case "describe": rc = s.describe(); break;
            case "list-offsets": rc = s.listOffsets(); break;
            case "delete-records": rc = s.deleteRecords(); break;
            case "read": rc = s.read(); break;
            default:
                System.err.println(USAGE);
                rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    private String opt(String key) {
        String v = opts.get(key);
        if (v == null) throw new IllegalArgumentException("missing --" + key + "\n" + USAGE);
        return v;
    }

    private static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static void emit(String json) {
        System.out.println(json);
    }

    private Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, opt("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "spark-calls-admin");
        return Admin.create(p);
    }

    private TopicDescription topic(Admin admin) throws Exception {
        String name = opt("topic");
        return admin.describeTopics(Collections.singletonList(name))
            .allTopicNames().get(60, TimeUnit.SECONDS).get(name);
    }

    // --- driver: the offset reader ----------------------------------------------

    private int describe() throws Exception {
        try (Admin admin = admin()) {
            TopicDescription d = topic(admin);
            StringBuilder parts = new StringBuilder();
            for (TopicPartitionInfo p : d.partitions()) {
                if (parts.length() > 0) parts.append(',');
                parts.append("{\"partition\":").append(p.partition())
                    .append(",\"leader\":").append(p.leader() == null ? -1 : p.leader().id())
                    .append(",\"replicas\":").append(ids(p.replicas()))
                    .append(",\"isr\":").append(ids(p.isr())).append('}');
            }
            emit("{\"topic\":" + q(d.name()) + ",\"internal\":" + d.isInternal()
                + ",\"partitions\":[" + parts + "]}");
        }
        return 0;
    }

    private static String ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out.toString();
    }

    private int listOffsets() throws Exception {
        String spec = opt("spec");
        OffsetSpec offsetSpec = spec.equals("earliest") ? OffsetSpec.earliest()
            : spec.equals("latest") ? OffsetSpec.latest()
            : OffsetSpec.forTimestamp(Long.parseLong(spec));
        try (Admin admin = admin()) {
            Map<TopicPartition, OffsetSpec> request = new HashMap<>();
            for (TopicPartitionInfo p : topic(admin).partitions())
                request.put(new TopicPartition(opt("topic"), p.partition()), offsetSpec);
            // Spark passes the isolation level it reads with; read_uncommitted unless told otherwise
            ListOffsetsOptions options = new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED);
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> got =
                admin.listOffsets(request, options).all().get(60, TimeUnit.SECONDS);
            List<TopicPartition> tps = new ArrayList<>(got.keySet());
            tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            for (TopicPartition tp : tps) {
                ListOffsetsResult.ListOffsetsResultInfo info = got.get(tp);
                emit("{\"partition\":" + tp.partition() + ",\"offset\":" + info.offset()
                    + ",\"timestamp\":" + info.timestamp() + "}");
            }
        }
        return 0;
    }

    private int deleteRecords() throws Exception {
        TopicPartition tp = new TopicPartition(opt("topic"), Integer.parseInt(opt("partition")));
        try (Admin admin = admin()) {
            DeletedRecords d = admin.deleteRecords(Collections.singletonMap(tp,
                    RecordsToDelete.beforeOffset(Long.parseLong(opt("before")))))
                .lowWatermarks().get(tp).get(60, TimeUnit.SECONDS);
            emit("{\"partition\":" + tp.partition() + ",\"low_watermark\":" + d.lowWatermark() + "}");
        }
        return 0;
    }

    // --- executor: one task reading one partition ----------------------------------

    private KafkaConsumer<byte[], byte[]> taskConsumer() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, "spark-kafka-source-" + UUID.randomUUID() + "-executor");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (opts.containsKey("max-poll-records")) p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opt("max-poll-records"));
        return new KafkaConsumer<>(p);
    }

    /**
     * Reads [from, until) as a Spark task does. A gap (records removed by
     * retention or DeleteRecords) shows as OffsetOutOfRangeException or as a
     * first record past the wanted offset; it is reported as "lost" and, with
     * --skip-lost (failOnDataLoss=false), the read continues from the earliest
     * available offset, else the command fails with exit code 4.
     */
    private int read() {
        TopicPartition tp = new TopicPartition(opt("topic"), Integer.parseInt(opt("partition")));
        List<TopicPartition> one = Collections.singletonList(tp);
        long offset = Long.parseLong(opt("from")), until = Long.parseLong(opt("until"));
        boolean skipLost = opts.containsKey("skip-lost");
        int polls = 0, empty = 0;
        try (KafkaConsumer<byte[], byte[]> c = taskConsumer()) {
            c.assign(one);
            c.seek(tp, offset);
            while (offset < until) {
                ConsumerRecords<byte[], byte[]> got;
                try {
                    got = c.poll(Duration.ofMillis(1000));
                } catch (OffsetOutOfRangeException e) {
                    long[] range = availableRange(c, tp);
                    emit("{\"lost\":[" + offset + "," + range[0] + "],\"reason\":\"out_of_range\""
                        + ",\"earliest\":" + range[0] + ",\"latest\":" + range[1] + "}");
                    if (!skipLost || range[0] <= offset) return 4;
                    offset = range[0];
                    c.seek(tp, offset);
                    continue;
                }
                polls++;
                long[] range = availableRange(c, tp);
                emit("{\"poll\":" + polls + ",\"records\":" + got.count()
                    + ",\"earliest\":" + range[0] + ",\"latest\":" + range[1] + "}");
                if (got.isEmpty()) {
                    if (++empty >= 10) return 3;
                    c.seek(tp, offset);
                    continue;
                }
                empty = 0;
                for (ConsumerRecord<byte[], byte[]> r : got.records(tp)) {
                    if (r.offset() < offset) continue;
                    if (r.offset() >= until) break;
                    if (r.offset() > offset) {
                        emit("{\"lost\":[" + offset + "," + r.offset() + "],\"reason\":\"gap\"}");
                        if (!skipLost) return 4;
                    }
                    emit("{\"offset\":" + r.offset() + ",\"timestamp\":" + r.timestamp()
                        + ",\"key\":" + q(str(r.key())) + ",\"value\":" + q(str(r.value())) + "}");
                    offset = r.offset() + 1;
                }
                // the range queries moved the position: go back to where the task is
                c.seek(tp, offset);
            }
            emit("{\"done\":" + offset + ",\"position\":" + c.position(tp) + "}");
        }
        return 0;
    }

    /** What Spark's getAvailableOffsetRange asks: seekToBeginning/seekToEnd, each followed by position. */
    private static long[] availableRange(KafkaConsumer<byte[], byte[]> c, TopicPartition tp) {
        List<TopicPartition> one = Collections.singletonList(tp);
        c.seekToBeginning(one);
        long earliest = c.position(tp);
        c.seekToEnd(one);
        long latest = c.position(tp);
        return new long[] {earliest, latest};
    }

    private static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }
}
