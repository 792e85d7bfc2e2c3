package io.groupfit.kafka.it;

import io.groupfit.kafka.GroupfitAssignor;
import io.groupfit.kafka.GroupfitRebalance;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One consumer of a group, driven by tests/integration/test_java_clients.py: it prints one JSON line per event on
 * stdout (partitions assigned, revoked or lost, with a CLOCK_MONOTONIC time so the test can line up several
 * processes; records read; its member id) and closes when stdin says "close". It commits after every batch and
 * on revocation, so a partition's next owner starts where it stopped.
 *
 * <p>args: bootstrap topic group identity mode(eager|cooperative|consumer[:remote assignor, groupfit by default])
 * serviceUrl [capacity (classic; 100)]. A system property named groupfit.* is passed to the assignor (e.g.
 * -Dgroupfit.reassign.interval.ms=500), and client.rack and group.instance.id to the consumer; after every poll the
 * consumer calls {@link GroupfitRebalance#enforceIfDue} and prints the rebalances it triggers.
 */
public final class TestConsumer {
    private static final Object OUT = new Object();

    private static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    private static String partitions(Collection<TopicPartition> partitions) {
        Set<Integer> numbers = new TreeSet<>();
        partitions.forEach(tp -> numbers.add(tp.partition()));
        return numbers.toString().replace(" ", "");
    }

    private static String quoted(String text) {
        StringBuilder json = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                json.append('\\').append(c);
            } else if (c < 0x20) {
                json.append(String.format("\\u%04x", (int) c));
            } else {
                json.append(c);
            }
        }
        return json.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], identity = args[3], mode = args[4];
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, identity);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        for (String key : List.of(ConsumerConfig.CLIENT_RACK_CONFIG, ConsumerConfig.GROUP_INSTANCE_ID_CONFIG)) {
            if (System.getProperty(key) != null) {
                config.put(key, System.getProperty(key));
            }
        }
        if (mode.startsWith("consumer")) {
            config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            config.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG,
                    mode.contains(":") ? mode.substring(mode.indexOf(':') + 1) : "groupfit");
        } else {
            config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, GroupfitAssignor.class.getName());
            config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            config.put(GroupfitAssignor.URL, args[5]);
            config.put(GroupfitAssignor.CAPACITY, args.length > 6 ? args[6] : "100");
            config.put(GroupfitAssignor.TIMEOUT_MS, "3000");
            config.put(GroupfitAssignor.REBALANCE_PROTOCOL, mode);
            System.getProperties().stringPropertyNames().stream().filter(k -> k.startsWith("groupfit."))
                    .forEach(k -> config.put(k, System.getProperty(k)));
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config);
        Thread commands = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("close")) {
                    // only "close" is a command
                }
            } catch (Exception ignored) {
                // stdin closed: close as well
            }
            consumer.wakeup();
        }, "commands");
        commands.setDaemon(true);
        commands.start();
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                if (!revoked.isEmpty()) {
                    consumer.commitSync();
                    emit("{\"event\":\"revoked\",\"partitions\":" + partitions(revoked) + ",\"t\":" + System.nanoTime() + "}");
                }
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                emit("{\"event\":\"assigned\",\"partitions\":" + partitions(assigned) + ",\"t\":" + System.nanoTime()
                        + ",\"member\":\"" + consumer.groupMetadata().memberId() + "\"}");
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> lost) {
                emit("{\"event\":\"lost\",\"partitions\":" + partitions(lost) + ",\"t\":" + System.nanoTime() + "}");
            }
        });
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                String enforced = GroupfitRebalance.enforceIfDue(consumer);
                if (enforced != null) {
                    emit("{\"event\":\"enforced\",\"t\":" + System.nanoTime() + ",\"reason\":"
                            + quoted(enforced) + "}");
                }
                if (!records.isEmpty()) {
                    List<String> read = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> record : records) {
                        read.add("[" + record.partition() + "," + record.offset() + "]");
                    }
                    emit("{\"event\":\"records\",\"records\":[" + String.join(",", read) + "]}");
                    try {
                        consumer.commitSync();
                    } catch (org.apache.kafka.clients.consumer.CommitFailedException
                            | org.apache.kafka.common.errors.RebalanceInProgressException e) {
                        emit("{\"event\":\"commit_failed\"}"); // the test then sees these records read twice
                    }
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException closing) {
            // asked to close
        } finally {
            consumer.close(); // revokes (and commits) before leaving the group
            emit("{\"event\":\"closed\",\"t\":" + System.nanoTime() + "}");
        }
    }
}
