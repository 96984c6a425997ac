import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives a broker with the real Java client so interop tests can compare what
 * it sees with what it sent. Every command prints JSON lines on stdout and
 * exits non-zero on failure (3 when fewer records than --count arrived).
 *
 * Records made by produce: key "k&lt;i&gt;", value "v&lt;i&gt;" (null for every
 * --null-every'th), header h=&lt;i&gt;, i counting from --start (default 0); with
 * --partitions N record i goes to partition i % N, with --timestamp-base B its
 * create time is B + i. With --stream each acknowledgement (or failure) is
 * printed as it comes, with the record's value, and --rate paces the sends
 * (records a second): for tests that fault brokers while records flow.
 */
public final class ClientHarness {
    private static final String USAGE = String.join("\n",
        "usage: ClientHarness <command> --bootstrap HOST:PORT [options]",
        "  produce --topic T [--partition P | --partitions N] --count N [--compression none|gzip|snappy|lz4|zstd]",
        "          [--null-every K] [--start I] [--timestamp-base MS] [--idempotent|--no-idempotent]",
        "          [--transactional-id ID] [--acks A] [--stream [--rate R]]",
        "  consume --topic T --partition P... [--offset earliest|latest|N] --count N [--timeout-ms MS]",
        "  group-consume --topic T --group G --count N [--timeout-ms MS] [--session-timeout-ms MS]",
        "  list-offsets --topic T (--partition P --timestamp MS|earliest|latest|max)...",
        "  admin create --topic T... [--partitions N] [--replication-factor R] [--config K=V]...",
        "  admin describe --topic T",
        "  admin alter-config --topic T --config K=V...",
        "  admin delete --topic T...",
        "  admin list-topics",
        "  admin describe-group --group G [--topic T]...",
        "  admin scram-upsert --user U --password P [--iterations N] | scram-delete --user U | scram-describe --user U",
        "  admin acl-create --principal P --operation OP --topic T --pattern LITERAL|PREFIXED",
        "  admin acl-describe|acl-delete --topic T --pattern LITERAL|PREFIXED|MATCH|ANY",
        "every command: [--client-config K=V]... (client settings: security.protocol, ssl.*, sasl.*)");

    private final Map<String, List<String>> opts = new HashMap<>();
    private final List<String> positional = new ArrayList<>();

    private ClientHarness(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--")) {
                String key = a.substring(2);
                boolean flag = i + 1 >= args.length || args[i + 1].startsWith("--");
                opts.computeIfAbsent(key, k -> new ArrayList<>()).add(flag ? "true" : args[++i]);
            } else {
                positional.add(a);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        ClientHarness h = new ClientHarness(args);
        if (h.positional.isEmpty()) {
            System.err.println(USAGE);
            System.exit(2);
        }
        int rc;
        switch (h.positional.get(0)) {
            case "produce": rc = h.produce(); break;
            case "consume": rc = h.consume(); break;
            case "group-consume": rc = h.groupConsume(); break;
            case "list-offsets": rc = h.listOffsets(); break;
            case "admin": rc = h.admin(); break;
            default:
                System.err.println(USAGE);
                rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    // --- options ---------------------------------------------------------

    private String opt(String key) {
        List<String> v = opts.get(key);
        if (v == null) throw new IllegalArgumentException("missing --" + key + "\n" + USAGE);
        return v.get(v.size() - 1);
    }

    private String opt(String key, String dflt) {
        return opts.containsKey(key) ? opt(key) : dflt;
    }

    private int intOpt(String key, int dflt) {
        return Integer.parseInt(opt(key, Integer.toString(dflt)));
    }

    private List<String> all(String key) {
        return opts.getOrDefault(key, Collections.emptyList());
    }

    private Properties base() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, opt("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, opt("client-id", "kafka-compat-java-harness"));
        for (String kv : all("client-config")) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    // --- produce / consume ---------------------------------------------------------

    private int produce() throws Exception {
        Properties p = base();
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opt("compression", "none"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        if (opts.containsKey("acks")) p.put(ProducerConfig.ACKS_CONFIG, opt("acks"));
        if (opts.containsKey("idempotent")) p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        if (opts.containsKey("no-idempotent")) p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        String txId = opt("transactional-id", null);
        if (txId != null) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId);
        String topic = opt("topic");
        Integer partition = opts.containsKey("partition") ? Integer.valueOf(opt("partition")) : null;
        int count = intOpt("count", 1), nullEvery = intOpt("null-every", 0), start = intOpt("start", 0);
        int partitions = intOpt("partitions", 0);
        Long timestampBase = opts.containsKey("timestamp-base") ? Long.valueOf(opt("timestamp-base")) : null;
        if (opts.containsKey("stream")) {
            return produceStream(p, topic, partition, partitions, start, count, intOpt("rate", 0));
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (txId != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = start; i < start + count; i++) {
                byte[] value = nullEvery > 0 && (i - start + 1) % nullEvery == 0 ? null : bytes("v" + i);
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic,
                    partitions > 0 ? Integer.valueOf(i % partitions) : partition,
                    timestampBase == null ? null : Long.valueOf(timestampBase + i), bytes("k" + i), value);
                rec.headers().add("h", bytes(Integer.toString(i)));
                sent.add(producer.send(rec));
            }
            if (txId != null) producer.commitTransaction();
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata md = f.get(60, TimeUnit.SECONDS);
                System.out.println("{\"topic\":" + q(md.topic()) + ",\"partition\":" + md.partition()
                    + ",\"offset\":" + md.offset() + ",\"timestamp\":" + md.timestamp() + "}");
            }
        }
        return 0;
    }

    private int produceStream(Properties p, String topic, Integer partition, int partitions, int start, int count,
                              int rate) throws Exception {
        long begin = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = start; i < start + count; i++) {
                if (rate > 0) {
                    long due = begin + (long) (i - start) * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                }
                String value = "v" + i;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic,
                    partitions > 0 ? Integer.valueOf(i % partitions) : partition, bytes("k" + i), bytes(value));
                producer.send(rec, (md, e) -> {
                    if (e != null) {
                        System.out.println("{\"error\":" + q(e.getClass().getSimpleName()) + ",\"value\":" + q(value)
                            + "}");
                    } else {
                        System.out.println("{\"partition\":" + md.partition() + ",\"offset\":" + md.offset()
                            + ",\"value\":" + q(value) + "}");
                    }
                });
            }
            producer.flush();
        }
        return 0;
    }

    private KafkaConsumer<byte[], byte[]> consumer(String group) {
        Properties p = base();
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            // Kafka's minimum, not the client's 45 s: a broker may hold the first
            // JoinGroup for part of the session timeout waiting for other members.
            int session = intOpt("session-timeout-ms", 6000);
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(session));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(session / 5));
        }
        return new KafkaConsumer<>(p);
    }

    private int consume() {
        List<TopicPartition> tps = new ArrayList<>();
        for (String p : all("partition")) tps.add(new TopicPartition(opt("topic"), Integer.parseInt(p)));
        if (tps.isEmpty()) tps.add(new TopicPartition(opt("topic"), 0));
        int count = intOpt("count", 1);
        try (KafkaConsumer<byte[], byte[]> c = consumer(null)) {
            c.assign(tps);
            String offset = opt("offset", "earliest");
            if (offset.equals("earliest")) c.seekToBeginning(tps);
            else if (offset.equals("latest")) c.seekToEnd(tps);
            else for (TopicPartition tp : tps) c.seek(tp, Long.parseLong(offset));
            return drain(c, count) >= count ? 0 : 3;
        }
    }

    private int groupConsume() {
        int count = intOpt("count", 1);
        try (KafkaConsumer<byte[], byte[]> c = consumer(opt("group"))) {
            c.subscribe(Collections.singletonList(opt("topic")));
            int got = drain(c, count);
            c.commitSync(Duration.ofSeconds(30));
            return got >= count ? 0 : 3;
        }
    }

    private int drain(KafkaConsumer<byte[], byte[]> c, int count) {
        long deadline = System.currentTimeMillis() + intOpt("timeout-ms", 30000);
        int got = 0;
        while (got < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                printRecord(r);
                got++;
            }
        }
        return got;
    }

    private static void printRecord(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder hs = new StringBuilder("[");
        for (Header h : r.headers()) {
            if (hs.length() > 1) hs.append(',');
            hs.append('[').append(q(h.key())).append(',').append(q(str(h.value()))).append(']');
        }
        hs.append(']');
        System.out.println("{\"topic\":" + q(r.topic()) + ",\"partition\":" + r.partition()
            + ",\"offset\":" + r.offset() + ",\"timestamp\":" + r.timestamp()
            + ",\"key\":" + q(str(r.key())) + ",\"value\":" + q(str(r.value()))
            + ",\"headers\":" + hs + "}");
    }

    // --- offsets / admin ---------------------------------------------------------

    /** One answer per --partition, in order; the i'th --timestamp goes with the i'th --partition (one applies to all). */
    private int listOffsets() throws Exception {
        List<String> parts = all("partition").isEmpty() ? Collections.singletonList("0") : all("partition");
        List<String> stamps = all("timestamp").isEmpty() ? Collections.singletonList("latest") : all("timestamp");
        List<Map.Entry<TopicPartition, OffsetSpec>> specs = new ArrayList<>();
        for (int i = 0; i < parts.size(); i++) {
            String ts = stamps.get(stamps.size() == 1 ? 0 : i);
            OffsetSpec spec = ts.equals("earliest") ? OffsetSpec.earliest()
                : ts.equals("latest") ? OffsetSpec.latest()
                : ts.equals("max") ? OffsetSpec.maxTimestamp()
                : OffsetSpec.forTimestamp(Long.parseLong(ts));
            specs.add(new java.util.AbstractMap.SimpleEntry<>(
                new TopicPartition(opt("topic"), Integer.parseInt(parts.get(i))), spec));
        }
        try (Admin admin = Admin.create(base())) {
            // one request per pair: a request may name a partition only once
            for (Map.Entry<TopicPartition, OffsetSpec> e : specs) {
                TopicPartition tp = e.getKey();
                ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Collections.singletonMap(tp, e.getValue()))
                    .partitionResult(tp).get(30, TimeUnit.SECONDS);
                System.out.println("{\"topic\":" + q(tp.topic()) + ",\"partition\":" + tp.partition()
                    + ",\"offset\":" + info.offset() + ",\"timestamp\":" + info.timestamp() + "}");
            }
        }
        return 0;
    }

    private int admin() throws Exception {
        String sub = positional.size() > 1 ? positional.get(1) : "";
        try (Admin admin = Admin.create(base())) {
            switch (sub) {
                case "create": {
                    List<NewTopic> ts = new ArrayList<>();
                    for (String name : all("topic"))
                        ts.add(new NewTopic(name, intOpt("partitions", 1),
                            (short) intOpt("replication-factor", 1)).configs(configs()));
                    admin.createTopics(ts).all().get(30, TimeUnit.SECONDS);
                    for (String name : all("topic")) System.out.println("{\"created\":" + q(name) + "}");
                    return 0;
                }
                case "describe": return describe(admin);
                case "alter-config": {
                    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, opt("topic"));
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (Map.Entry<String, String> e : configs().entrySet())
                        ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
                    admin.incrementalAlterConfigs(Collections.singletonMap(res, ops)).all().get(30, TimeUnit.SECONDS);
                    System.out.println("{\"altered\":" + q(opt("topic")) + "}");
                    return 0;
                }
                case "delete":
                    admin.deleteTopics(all("topic")).all().get(30, TimeUnit.SECONDS);
                    for (String name : all("topic")) System.out.println("{\"deleted\":" + q(name) + "}");
                    return 0;
                case "list-topics":
                    for (String name : admin.listTopics().names().get(30, TimeUnit.SECONDS))
                        System.out.println("{\"topic\":" + q(name) + "}");
                    return 0;
                case "describe-group": return describeGroup(admin);
                case "scram-upsert": case "scram-delete": return alterScram(admin, sub);
                case "scram-describe": return describeScram(admin);
                case "acl-create": case "acl-describe": case "acl-delete": return acls(admin, sub);
                default:
                    System.err.println(USAGE);
                    return 2;
            }
        }
    }

    /** SCRAM-SHA-256 credentials of --user: set with --password and --iterations, or deleted. */
    private int alterScram(Admin admin, String sub) throws Exception {
        String user = opt("user");
        UserScramCredentialAlteration change = sub.equals("scram-upsert")
            ? new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                intOpt("iterations", 4096)), opt("password"))
            : new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256);
        admin.alterUserScramCredentials(Collections.singletonList(change)).all().get(30, TimeUnit.SECONDS);
        System.out.println("{\"altered\":" + q(user) + "}");
        return 0;
    }

    private int describeScram(Admin admin) throws Exception {
        String user = opt("user");
        UserScramCredentialsDescription d = admin.describeUserScramCredentials(Collections.singletonList(user))
            .description(user).get(30, TimeUnit.SECONDS);
        for (ScramCredentialInfo info : d.credentialInfos())
            System.out.println("{\"user\":" + q(d.name()) + ",\"mechanism\":" + q(info.mechanism().name())
                + ",\"iterations\":" + info.iterations() + "}");
        return 0;
    }

    /** Topic ACLs: acl-create --principal P --operation OP --topic NAME --pattern LITERAL|PREFIXED;
     *  acl-describe and acl-delete --topic NAME --pattern LITERAL|PREFIXED|MATCH|ANY (any principal, operation). */
    private int acls(Admin admin, String sub) throws Exception {
        PatternType pattern = PatternType.valueOf(opt("pattern"));
        Collection<AclBinding> out;
        if (sub.equals("acl-create")) {
            AclBinding b = new AclBinding(new ResourcePattern(ResourceType.TOPIC, opt("topic"), pattern),
                new AccessControlEntry(opt("principal"), "*", AclOperation.valueOf(opt("operation")),
                    AclPermissionType.ALLOW));
            admin.createAcls(Collections.singletonList(b)).all().get(30, TimeUnit.SECONDS);
            out = Collections.singletonList(b);
        } else {
            AclBindingFilter f = new AclBindingFilter(new ResourcePatternFilter(ResourceType.TOPIC, opt("topic"), pattern),
                AccessControlEntryFilter.ANY);
            out = sub.equals("acl-describe") ? admin.describeAcls(f).values().get(30, TimeUnit.SECONDS)
                : admin.deleteAcls(Collections.singletonList(f)).all().get(30, TimeUnit.SECONDS);
        }
        for (AclBinding b : out)
            System.out.println("{\"name\":" + q(b.pattern().name()) + ",\"pattern\":" + q(b.pattern().patternType().name())
                + ",\"principal\":" + q(b.entry().principal()) + ",\"operation\":" + q(b.entry().operation().name()) + "}");
        return 0;
    }

    private Map<String, String> configs() {
        Map<String, String> out = new HashMap<>();
        for (String kv : all("config")) {
            int eq = kv.indexOf('=');
            out.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return out;
    }

    private int describe(Admin admin) throws Exception {
        String topic = opt("topic");
        TopicDescription d = admin.describeTopics(Collections.singletonList(topic))
            .allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        StringBuilder parts = new StringBuilder("[");
        for (TopicPartitionInfo p : d.partitions()) {
            if (parts.length() > 1) parts.append(',');
            parts.append("{\"partition\":").append(p.partition()).append(",\"leader\":")
                .append(p.leader() == null ? -1 : p.leader().id()).append('}');
        }
        parts.append(']');
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = admin.describeConfigs(Collections.singletonList(res)).all().get(30, TimeUnit.SECONDS).get(res);
        StringBuilder cfg = new StringBuilder("{");
        for (ConfigEntry e : config.entries()) {
            if (cfg.length() > 1) cfg.append(',');
            cfg.append(q(e.name())).append(':').append(q(e.value()));
        }
        cfg.append('}');
        System.out.println("{\"topic\":" + q(topic) + ",\"partitions\":" + parts + ",\"configs\":" + cfg + "}");
        return 0;
    }

    private int describeGroup(Admin admin) throws Exception {
        String group = opt("group");
        ConsumerGroupDescription g = admin.describeConsumerGroups(Collections.singletonList(group))
            .all().get(30, TimeUnit.SECONDS).get(group);
        Collection<MemberDescription> members = g.members();
        ListConsumerGroupOffsetsSpec spec = new ListConsumerGroupOffsetsSpec();
        if (!all("topic").isEmpty()) {
            List<TopicPartition> tps = new ArrayList<>();
            for (TopicDescription d : admin.describeTopics(all("topic")).allTopicNames().get(30, TimeUnit.SECONDS).values())
                for (TopicPartitionInfo p : d.partitions()) tps.add(new TopicPartition(d.name(), p.partition()));
            spec.topicPartitions(tps);
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(Collections.singletonMap(group, spec))
            .partitionsToOffsetAndMetadata(group).get(30, TimeUnit.SECONDS);
        StringBuilder os = new StringBuilder("[");
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            if (os.length() > 1) os.append(',');
            os.append("{\"topic\":").append(q(e.getKey().topic())).append(",\"partition\":")
                .append(e.getKey().partition()).append(",\"offset\":")
                .append(e.getValue() == null ? -1 : e.getValue().offset()).append('}');
        }
        os.append(']');
        System.out.println("{\"group\":" + q(group) + ",\"state\":" + q(String.valueOf(g.state()))
            + ",\"members\":" + members.size() + ",\"offsets\":" + os + "}");
        return 0;
    }

    // --- JSON ---------------------------------------------------------------------

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    /** A JSON string literal, or null. */
    private static String q(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
