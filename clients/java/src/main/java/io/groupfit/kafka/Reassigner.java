package io.groupfit.kafka;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.common.config.ConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The leader's reassignment check of one {@link GroupfitAssignor} ({@link GroupfitRebalance} says what it does). Its
 * assignor tells it when this member led a rebalance with groupfit's answer ({@link #led}) and when the rebalance
 * completed ({@link #joined}); the consumer's poll loop calls {@link #enforceIfDue}. All three run on the consumer's
 * thread; only the decision's HTTP call completes elsewhere, and is read once done.
 */
final class Reassigner {
    private static final Logger log = LoggerFactory.getLogger(GroupfitRebalance.class);

    private final GroupfitService service;
    private final String group;
    private final Duration timeout;
    private final long intervalNanos;
    private final long minIntervalNanos;
    private final Map<String, String> guards; // the decision's query parameters fixed by the configuration

    private boolean ledThisRound; // this member's assign() ran with groupfit's answer since the round began
    private int leaderGeneration = -1; // the generation this member led, -1 when it leads none
    private Map<String, Double> memberCapacities = Map.of();
    private String registered;
    private long nextCheckNanos;
    private CompletableFuture<Api.ScaleSignal> pending;
    private boolean triggered;
    private long lastTriggerNanos;

    private Reassigner(GroupfitService service, String group, Duration timeout, long intervalMs, long minIntervalMs,
            Map<String, String> guards) {
        this.service = service;
        this.group = group;
        this.timeout = timeout;
        this.intervalNanos = Duration.ofMillis(intervalMs).toNanos();
        this.minIntervalNanos = Duration.ofMillis(minIntervalMs).toNanos();
        this.guards = guards;
    }

    /** The check as the consumer's configuration sets it (GroupfitRebalance's settings). */
    static Reassigner configure(Map<String, ?> configs, GroupfitService service, String group, Duration timeout) {
        long interval = (long) atLeastZero(configs, GroupfitRebalance.INTERVAL_MS, "0", true);
        long minInterval = (long) atLeastZero(configs, GroupfitRebalance.MIN_INTERVAL_MS, "60000", true);
        Map<String, String> guards = new LinkedHashMap<>();
        guards.put("algorithm", service.algorithm());
        guards.put("min_interval_s", String.valueOf(minInterval / 1000.0));
        if (service.params() != null) {
            guards.put("params", json(service.params()));
        }
        for (String[] setting : new String[][] {{GroupfitRebalance.MIN_GAIN, "min_gain"},
                {GroupfitRebalance.MAX_RSCORE, "max_rscore"}, {GroupfitRebalance.MAX_MOVES, "max_moves"}}) {
            if (configs.get(setting[0]) != null) {
                double value = atLeastZero(configs, setting[0], null, setting[1].equals("max_moves"));
                guards.put(setting[1], setting[1].equals("max_moves") ? String.valueOf((long) value) : String.valueOf(value));
            }
        }
        return new Reassigner(service, group, timeout, interval, minInterval, guards);
    }

    private static double atLeastZero(Map<String, ?> configs, String key, String otherwise, boolean whole) {
        Object value = configs.get(key) == null ? otherwise : configs.get(key);
        try {
            double parsed = whole ? Long.parseLong(value.toString().trim()) : Double.parseDouble(value.toString());
            if (parsed >= 0 && Double.isFinite(parsed)) {
                return parsed;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        throw new ConfigException(key, value, whole ? "must be a whole number, at least 0" : "must be a number, at least 0");
    }

    private static String json(Object value) {
        try {
            return GroupfitClient.JSON.writeValueAsString(value);
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e); // maps of strings and numbers always serialize
        }
    }

    /** A rebalance round begins on this member (it is about to send its subscription). */
    void joining() {
        ledThisRound = false;
    }

    /** This member's assign() computed the round's assignment; `byService`: from groupfit's answer. */
    void led(boolean byService, Map<String, Double> capacities) {
        ledThisRound = byService;
        memberCapacities = Map.copyOf(capacities);
    }

    /** The round completed with `metadata`: this member leads the new generation if it computed it. */
    void joined(ConsumerGroupMetadata metadata) {
        leaderGeneration = ledThisRound ? metadata.generationId() : -1;
        ledThisRound = false;
        pending = null;
        nextCheckNanos = System.nanoTime() + intervalNanos;
        if (intervalNanos > 0) {
            registered = GroupfitRebalance.register(metadata.groupId(), metadata.memberId(), registered, this);
        }
    }

    String enforceIfDue(Consumer<?, ?> consumer, int generation) {
        if (leaderGeneration < 0 || generation != leaderGeneration) {
            return null;
        }
        long now = System.nanoTime();
        if (pending != null) {
            if (!pending.isDone()) {
                return null;
            }
            Api.ScaleSignal signal = answer(pending);
            pending = null;
            if (signal == null || !"reass".equals(signal.action()) || !rested(now)) {
                return null;
            }
            String reason = "groupfit reass: " + signal.reason();
            try {
                consumer.enforceRebalance(reason);
            } catch (RuntimeException e) {
                log.warn("group {}: could not trigger the rebalance groupfit asks for: {}", group, e.toString());
                return null;
            }
            triggered = true;
            lastTriggerNanos = now;
            log.info("group {}: triggered a rebalance (gain {}, {} moves, Rscore {}): {}", group, signal.gain(),
                    signal.moves(), signal.rscore(), signal.reason());
            return reason;
        }
        if (now - nextCheckNanos >= 0 && rested(now)) {
            nextCheckNanos = now + intervalNanos;
            Map<String, String> query = new LinkedHashMap<>(guards);
            if (!memberCapacities.isEmpty()) {
                query.put("member_capacities", json(memberCapacities));
            }
            pending = service.client().scale(group, query, timeout);
        }
        return null;
    }

    /** Whether the last triggered rebalance is at least the minimum interval ago. */
    private boolean rested(long now) {
        return !triggered || now - lastTriggerNanos >= minIntervalNanos;
    }

    private Api.ScaleSignal answer(CompletableFuture<Api.ScaleSignal> done) {
        try {
            return done.join();
        } catch (RuntimeException e) {
            log.debug("group {}: no scaling decision ({})", group, GroupfitService.reason(e));
            return null;
        }
    }
}
