import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads partition 0 of a topic from offset 0 until COUNT records, printing "offset key" per record: the Java
 * client against a tiered topic, whose early offsets only remote storage holds. auto.offset.reset=none, so an
 * offset the broker cannot serve fails the read instead of skipping ahead.
 *
 * java TieredReader BOOTSTRAP TOPIC COUNT
 */
public class TieredReader {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        int count = Integer.parseInt(args[2]);
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(args[1], 0);
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            long deadline = System.currentTimeMillis() + 90_000;
            StringBuilder out = new StringBuilder();
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    out.append(r.offset()).append(' ').append(new String(r.key())).append('\n');
                    got++;
                }
            }
            System.out.print(out);
        }
        System.exit(got >= count ? 0 : 3);
    }
}
