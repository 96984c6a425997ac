import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;

/**
 * A Kafka Streams 4.x application for interop/test_kafka_streams.py, built so that its output is
 * computable in Python:
 *
 *   A: key "a<id>", value "<id>,<n>"   -- re-keyed to "<id>" (selectKey: a repartition topic)
 *   B: key "<id>",  value "<m>"
 *   OUT:    "<id>" -> "<n+m>"           -- a windowed KStream-KStream inner join (window stores);
 *                                         one A and one B record per id, so one result per id
 *   COUNTS: "b<id % 10>" -> "<count>"   -- the join results grouped by a new key (groupBy: a
 *                                         second repartition) and counted in the store "bucket-counts"
 *
 * usage: WordJoin BOOTSTRAP APPLICATION-ID GUARANTEE(at_least_once|exactly_once_v2) STATE-DIR
 *                 TOPIC-A TOPIC-B TOPIC-OUT TOPIC-COUNTS REPLICATION-FACTOR [GROUP-PROTOCOL [STANDBYS]]
 * GROUP-PROTOCOL is classic (the default) or streams (KIP-1071: the broker assigns the tasks); STANDBYS
 * is num.standby.replicas (0 by default; with the streams protocol the broker's group config decides).
 * Prints "state RUNNING" etc. as the instance changes state; SIGTERM closes it, SIGKILL is a crash.
 */
public final class WordJoin {
    public static void main(String[] args) throws Exception {
        if (args.length < 9 || args.length > 11) {
            System.err.println("usage: WordJoin BOOTSTRAP APP-ID GUARANTEE STATE-DIR A B OUT COUNTS RF [PROTOCOL [STANDBYS]]");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[2]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Integer.parseInt(args[8]));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args.length > 9 ? args[9] : "classic");
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, args.length > 10 ? Integer.parseInt(args[10]) : 0);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);   // every count update goes out
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // a crashed instance's tasks move after the session timeout: keep it short
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);
        p.put(StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG, Long.MAX_VALUE);   // no warm-up probing rebalances

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> a = builder.stream(args[4], Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((k, v) -> v.substring(0, v.indexOf(',')))
            .mapValues(v -> v.substring(v.indexOf(',') + 1));
        KStream<String, String> b = builder.stream(args[5], Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> joined = a.join(b,
            (n, m) -> Long.toString(Long.parseLong(n) + Long.parseLong(m)),
            JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMinutes(10)),
            StreamJoined.<String, String, String>with(Serdes.String(), Serdes.String(), Serdes.String())
                .withName("ab-join").withStoreName("ab-join-store"));
        joined.to(args[6], Produced.with(Serdes.String(), Serdes.String()));
        joined.groupBy((k, v) -> "b" + (Long.parseLong(k) % 10), Grouped.with("by-bucket", Serdes.String(), Serdes.String()))
            .count(Materialized.as("bucket-counts"))
            .toStream()
            .map((k, v) -> KeyValue.pair(k, Long.toString(v)))
            .to(args[7], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(20));
    }
}
