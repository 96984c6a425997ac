import java.time.Duration;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One share group member (KIP-932) written with the Java client 4.x's KafkaShareConsumer, reporting
 * every record it is given as a JSON line {"event":"record","p":..,"o":..,"v":..,"d":delivery count,"ack":..},
 * and in explicit mode, once commitSync says a partition's acknowledgements were kept, each record it
 * accepted there as {"event":"accepted","p":..,"o":..,"v":..}
 * for interop/test_share_groups.py; "close" on stdin closes it, SIGKILL is a crash.
 *
 * usage: ShareMember BOOTSTRAP TOPIC GROUP NAME MODE
 *   implicit  every record is accepted by the next poll (share.acknowledgement.mode=implicit)
 *   explicit  each record acknowledged by its value's first letter: "r" released on its first delivery
 *             (accepted after), "x" rejected, "p" released on every delivery (a poison record), else accepted
 *   hold      explicit, but the first records received are never acknowledged and polling stops
 */
public final class ShareMember {
    static synchronized void emit(String event, String fields) {
        System.out.println("{\"event\":\"" + event + "\",\"t\":" + (System.currentTimeMillis() / 1000.0)
            + (fields.isEmpty() ? "" : "," + fields) + "}");
        System.out.flush();
    }

    static String quote(String s) {
        return "\"" + (s == null ? "" : s.replace("\\", "\\\\").replace("\"", "\\\"")) + "\"";
    }

    static AcknowledgeType decide(ConsumerRecord<String, String> r, int delivery) {
        String v = r.value() == null ? "" : r.value();
        if (v.startsWith("x")) return AcknowledgeType.REJECT;
        if (v.startsWith("p")) return AcknowledgeType.RELEASE;
        if (v.startsWith("r") && delivery == 1) return AcknowledgeType.RELEASE;
        return AcknowledgeType.ACCEPT;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], name = args[3], mode = args[4];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", name);
        p.put("share.acknowledgement.mode", mode.equals("implicit") ? "implicit" : "explicit");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p);
        java.util.concurrent.CountDownLatch closing = new java.util.concurrent.CountDownLatch(1);
        Thread stdin = new Thread(() -> {
            try {
                java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("close")) { }
            } catch (java.io.IOException ignored) { }
            closing.countDown();
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();
        consumer.subscribe(java.util.List.of(topic));
        emit("subscribed", "\"name\":" + quote(name));
        try {
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                java.util.List<ConsumerRecord<String, String>> accepted = new java.util.ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(-1);
                    String ack = mode.equals("implicit") ? "ACCEPT" : mode.equals("hold") ? "HOLD"
                        : decide(r, delivery).name();
                    emit("record", "\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":" + quote(r.value())
                        + ",\"d\":" + delivery + ",\"ack\":" + quote(ack));
                    if (mode.equals("explicit")) consumer.acknowledge(r, decide(r, delivery));
                    if (mode.equals("explicit") && decide(r, delivery) == AcknowledgeType.ACCEPT) accepted.add(r);
                }
                if (mode.equals("explicit") && !records.isEmpty()) {
                    java.util.Map<org.apache.kafka.common.TopicIdPartition,
                        java.util.Optional<org.apache.kafka.common.KafkaException>> kept;
                    try {
                        kept = consumer.commitSync();
                    } catch (org.apache.kafka.common.KafkaException e) {
                        emit("commit-failed", "\"error\":" + quote(e.toString()));
                        continue;
                    }
                    java.util.Set<Integer> ok = new java.util.HashSet<>();
                    kept.forEach((tp, error) -> {
                        if (error.isEmpty()) ok.add(tp.partition());
                        else emit("commit-failed", "\"p\":" + tp.partition() + ",\"error\":" + quote(error.get().toString()));
                    });
                    for (ConsumerRecord<String, String> r : accepted) {
                        if (ok.contains(r.partition())) emit("accepted", "\"p\":" + r.partition() + ",\"o\":" + r.offset()
                            + ",\"v\":" + quote(r.value()));
                    }
                }
                if (mode.equals("hold") && !records.isEmpty()) {
                    emit("holding", "");
                    closing.await();        // holds its records, never polling again, until killed or closed
                    break;
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            // "close" on stdin
        } finally {
            consumer.close();
            emit("closed", "");
        }
    }
}
