package io.groupfit.kafka.it;

import io.groupfit.kafka.GroupfitAssignor;
import io.groupfit.kafka.GroupfitRebalance;
import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A consumer of the live experiment (app/experiment, docs/experiment.md): it spends a fixed time on every event
 * (5 ms by default, so it processes at most μ = 200 events/s; it sleeps until each event's end, so it uses no core
 * while it "works", and an oversleep does not add up: event k of a busy stretch ends at its start + k·5 ms) and
 * records every event's latency, not a sample: the time it finished the event minus the production time the
 * event carries (its value's first 8 bytes, µs since the epoch, big-endian; both clocks are this machine's).
 *
 * <p>Files, in {@code --out-dir}, appended to (an id the autoscaler starts again adds a life):
 * <ul>
 *   <li>{@code <id>.lat}: one 28-byte big-endian record per event processed: partition (int32), offset (int64),
 *       produced and processed (int64, µs since the epoch); flushed after every batch;</li>
 *   <li>{@code <id>.events.jsonl}: {@code start}, every rebalance callback ({@code assigned}, {@code revoked},
 *       {@code lost}, with the time in µs since the epoch, the partitions and the generation), every rebalance
 *       this member triggered ({@code reass}, with the reason {@link GroupfitRebalance#enforceIfDue} gave; called
 *       after every poll by a member with the groupfit assignor), a failed commit ({@code commit_failed}),
 *       {@code closed}.</li>
 * </ul>
 *
 * <p>It commits after every batch (asynchronously) and on revocation and close (synchronously), so a partition's
 * next owner starts where it stopped. SIGTERM makes it leave the group gracefully (commit, close) and exit.
 *
 * <p>Options: {@code --bootstrap B --topic T --group G --id ID --out-dir DIR} and
 * {@code --process-ms 5}, {@code --protocol classic|consumer}, {@code --assignor groupfit|cooperative-sticky|range}
 * (classic) or {@code groupfit|uniform|range} (consumer: the broker's assignor), {@code --heartbeat-ms 3000},
 * {@code --session-ms 45000} (classic), {@code --service-url U --capacity C --algorithm A} (groupfit, classic),
 * {@code --max-poll-records 25}, {@code --config key=value} (any consumer or assignor setting; repeatable).
 */
public final class ExperimentConsumer {
    private final String id;
    private final long processNanos;
    private final DataOutputStream latencies;
    private final Writer events;
    private final boolean reassCheck;
    private long busyUntil;

    private ExperimentConsumer(String id, long processNanos, Path outDir, boolean reassCheck) throws IOException {
        this.id = id;
        this.processNanos = processNanos;
        Files.createDirectories(outDir);
        this.latencies = new DataOutputStream(new BufferedOutputStream(
                new FileOutputStream(outDir.resolve(id + ".lat").toFile(), true), 1 << 16));
        this.events = new OutputStreamWriter(
                new FileOutputStream(outDir.resolve(id + ".events.jsonl").toFile(), true), StandardCharsets.UTF_8);
        this.reassCheck = reassCheck;
    }

    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    private synchronized void emit(String kind, String fields) {
        try {
            events.write("{\"event\":\"" + kind + "\",\"t\":" + nowMicros() + ",\"id\":\"" + id + "\""
                    + (fields.isEmpty() ? "" : "," + fields) + "}\n");
            events.flush();
        } catch (IOException e) {
            throw new IllegalStateException("cannot write the events file", e);
        }
    }

    private static String partitions(Collection<TopicPartition> partitions) {
        Set<Integer> numbers = new TreeSet<>();
        partitions.forEach(tp -> numbers.add(tp.partition()));
        return "\"partitions\":" + numbers.toString().replace(" ", "");
    }

    private static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    /**
     * Sleeps until this event's end: the previous event's end plus the processing time. A batch starts at the
     * previous batch's end or, after idling, when poll returned it ({@link #run}); within a batch an oversleep is
     * made up by the next event, so a busy consumer processes exactly 1 / processing time events per second.
     */
    private void process(ConsumerRecord<byte[], byte[]> record) throws IOException {
        busyUntil += processNanos;
        for (long left = busyUntil - System.nanoTime(); left > 0; left = busyUntil - System.nanoTime()) {
            LockSupport.parkNanos(left);
        }
        long processed = nowMicros();
        byte[] value = record.value();
        long produced = value != null && value.length >= 8 ? ByteBuffer.wrap(value, 0, 8).getLong() : -1L;
        latencies.writeInt(record.partition());
        latencies.writeLong(record.offset());
        latencies.writeLong(produced);
        latencies.writeLong(processed);
    }

    private static Map<String, String> options(String[] args) {
        Map<String, String> options = new LinkedHashMap<>();
        StringBuilder configs = new StringBuilder();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --option value pairs, got " + String.join(" ", args));
            }
            String key = args[i].substring(2);
            if (key.equals("config")) {
                configs.append(args[i + 1]).append('\n');
            } else {
                options.put(key, args[i + 1]);
            }
        }
        options.put("config", configs.toString());
        return options;
    }

    private static String required(Map<String, String> options, String key) {
        String value = options.get(key);
        if (value == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return value;
    }

    static Properties consumerConfig(Map<String, String> options) {
        String protocol = options.getOrDefault("protocol", "classic");
        String assignor = options.getOrDefault("assignor", "groupfit");
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(options, "bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, required(options, "group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, required(options, "id"));
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, options.getOrDefault("max-poll-records", "25"));
        config.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, options.getOrDefault("heartbeat-ms", "3000"));
        switch (protocol) {
            case "classic" -> {
                config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, options.getOrDefault("session-ms", "45000"));
                switch (assignor) {
                    case "groupfit" -> {
                        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, GroupfitAssignor.class.getName());
                        config.put(GroupfitAssignor.URL, required(options, "service-url"));
                        config.put(GroupfitAssignor.CAPACITY, options.getOrDefault("capacity", "180"));
                        config.put(GroupfitAssignor.ALGORITHM, options.getOrDefault("algorithm", "least-loaded"));
                        config.put(GroupfitAssignor.REBALANCE_PROTOCOL, "cooperative");
                    }
                    case "cooperative-sticky" -> config.put(
                            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
                    case "range" -> config.put(
                            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
                    default -> throw new IllegalArgumentException(
                            "--assignor " + assignor + ": classic groups take groupfit, cooperative-sticky or range");
                }
            }
            case "consumer" -> {
                config.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
                // KIP-848: the broker assigns; the heartbeat interval and session timeout are the broker's
                // group.consumer.* settings, so a client-side value is refused.
                config.remove(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG);
                if (!List.of("groupfit", "uniform", "range").contains(assignor)) {
                    throw new IllegalArgumentException(
                            "--assignor " + assignor + ": KIP-848 groups take the broker's groupfit, uniform or range");
                }
                config.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
            }
            default -> throw new IllegalArgumentException("--protocol must be classic or consumer, got " + protocol);
        }
        for (String line : options.get("config").split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                config.put(line.substring(0, eq), line.substring(eq + 1));
            } else if (!line.isBlank()) {
                throw new IllegalArgumentException("--config takes key=value, got " + line);
            }
        }
        return config;
    }

    /** The REASS check (the leader asks groupfit whether to rebalance with the same members), recorded. */
    private void enforceIfDue(Consumer<byte[], byte[]> consumer) {
        try {
            String reason = GroupfitRebalance.enforceIfDue(consumer);
            if (reason != null) {
                emit("reass", "\"reason\":" + quoted(reason));
            }
        } catch (WakeupException wakeup) {
            throw wakeup;
        } catch (RuntimeException e) {
            emit("reass_failed", "\"reason\":" + quoted(e.toString()));
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = options(args);
        Properties config = consumerConfig(options);
        boolean groupfit = options.getOrDefault("assignor", "groupfit").equals("groupfit");
        ExperimentConsumer self = new ExperimentConsumer(
                required(options, "id"),
                Math.round(Double.parseDouble(options.getOrDefault("process-ms", "5")) * 1_000_000),
                Path.of(required(options, "out-dir")),
                groupfit);
        self.run(config, required(options, "topic"));
    }

    private void run(Properties config, String topic) throws IOException, InterruptedException {
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config);
        CountDownLatch closed = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                if (!closed.await(30, TimeUnit.SECONDS)) {
                    main.interrupt();
                }
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }, "sigterm"));
        emit("start", "\"protocol\":" + quoted(config.getProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"))
                + ",\"reass_check\":" + reassCheck);
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                if (!revoked.isEmpty()) {
                    commit(consumer, true);
                    emit("revoked", partitions(revoked) + ",\"generation\":" + consumer.groupMetadata().generationId());
                }
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                emit("assigned", partitions(assigned) + ",\"generation\":" + consumer.groupMetadata().generationId());
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> lost) {
                emit("lost", partitions(lost) + ",\"generation\":" + consumer.groupMetadata().generationId());
            }
        });
        try {
            while (true) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                busyUntil = Math.max(busyUntil, System.nanoTime());
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    process(record);
                }
                if (!records.isEmpty()) {
                    latencies.flush();
                    commit(consumer, false);
                }
                if (reassCheck) {
                    enforceIfDue(consumer);
                }
            }
        } catch (WakeupException stopping) {
            // SIGTERM: leave the group
        } finally {
            latencies.flush();
            commit(consumer, true);
            consumer.close(Duration.ofSeconds(20)); // revokes (committing, in the listener) and leaves the group
            latencies.close();
            emit("closed", "");
            events.close();
            closed.countDown();
        }
    }

    private void commit(KafkaConsumer<byte[], byte[]> consumer, boolean sync) {
        try {
            if (sync) {
                consumer.commitSync(Duration.ofSeconds(10));
            } else {
                consumer.commitAsync();
            }
        } catch (WakeupException wakeup) {
            throw wakeup;
        } catch (RuntimeException e) {
            emit("commit_failed", "\"reason\":" + quoted(e.getClass().getSimpleName() + ": " + e.getMessage()));
        }
    }
}
