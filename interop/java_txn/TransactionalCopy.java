import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java twin of interop/txn_support.py's "copy": a consume-transform-produce
 * loop with the Java client's transactions. Every third transaction is flushed,
 * then aborted, and the consumer rewound to the last committed positions.
 * usage: TransactionalCopy BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID COUNT [PAUSE_MS]
 * PAUSE_MS (default 0): a pause after each transaction, so that a test can act in the middle of a run.
 * Prints {"progress": n} after each commit, then {"committed": n, "aborted": m, "transactions": t}.
 *
 * usage: TransactionalCopy probe BOOTSTRAP TOPIC
 * What Spark's Kafka source relies on for kafka.isolation.level: the Admin client's latest offset of
 * partition 0 per isolation level, and the values a consumer of each level reads from the start up to it.
 * Prints {"read_committed": {"end": n, "values": [...]}, "read_uncommitted": {...}}.
 */
public final class TransactionalCopy {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("probe")) {
            probe(args[1], args[2]);
            return;
        }
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3], txnId = args[4];
        int count = Integer.parseInt(args[5]);
        long pauseMs = args.length > 6 ? Long.parseLong(args[6]) : 0;
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        long deadline = System.currentTimeMillis() + 180_000;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp, new ByteArraySerializer(),
                new ByteArraySerializer())) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(input));
            Map<TopicPartition, OffsetAndMetadata> committedPos = new HashMap<>();
            int committed = 0, aborted = 0, txn = 0;
            while (committed < count) {
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("{\"error\": \"timed out\", \"committed\": " + committed + "}");
                    System.exit(3);
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofSeconds(1));
                if (records.isEmpty()) {
                    continue;
                }
                txn++;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] value = new byte[r.value().length + 2];
                    value[0] = 't';
                    value[1] = '-';
                    System.arraycopy(r.value(), 0, value, 2, r.value().length);
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), value));
                    positions.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                if (txn % 3 == 2) {
                    producer.flush();
                    producer.abortTransaction();
                    aborted += records.count();
                    for (TopicPartition tp : consumer.assignment()) {
                        OffsetAndMetadata back = committedPos.get(tp);
                        if (back == null) {
                            consumer.seekToBeginning(Collections.singletonList(tp));
                        } else {
                            consumer.seek(tp, back.offset());
                        }
                    }
                } else {
                    producer.commitTransaction();
                    committed += records.count();
                    committedPos.putAll(positions);
                    System.out.println("{\"progress\": " + committed + "}");
                    System.out.flush();
                }
                if (pauseMs > 0) {
                    Thread.sleep(pauseMs);
                }
            }
            System.out.println("{\"committed\": " + committed + ", \"aborted\": " + aborted
                + ", \"transactions\": " + txn + "}");
        }
    }

    private static void probe(String bootstrap, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        StringBuilder out = new StringBuilder("{");
        try (Admin admin = Admin.create(ap)) {
            for (IsolationLevel level : new IsolationLevel[] {IsolationLevel.READ_COMMITTED,
                    IsolationLevel.READ_UNCOMMITTED}) {
                long end = admin.listOffsets(Collections.singletonMap(tp, OffsetSpec.latest()),
                        new ListOffsetsOptions(level)).partitionResult(tp).get().offset();
                Properties cp = new Properties();
                cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, level.toString());
                cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                StringBuilder values = new StringBuilder();
                try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp, new ByteArrayDeserializer(),
                        new ByteArrayDeserializer())) {
                    consumer.assign(Collections.singletonList(tp));
                    consumer.seekToBeginning(Collections.singletonList(tp));
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                            if (r.offset() < end) {
                                values.append(values.length() == 0 ? "" : ", ").append('"')
                                    .append(new String(r.value(), java.nio.charset.StandardCharsets.UTF_8)).append('"');
                            }
                        }
                    }
                }
                out.append(out.length() == 1 ? "" : ", ").append('"').append(level.toString().toLowerCase())
                    .append("\": {\"end\": ").append(end).append(", \"values\": [").append(values).append("]}");
            }
        }
        System.out.println(out.append("}"));
    }
}
