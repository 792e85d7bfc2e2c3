package io.groupfit.kafka.core;

import java.util.Map;

/**
 * What an algorithm returns: bins (consumer, its partitions) in the order they were opened, and its outputs; in zone
 * mode each bin's rack, known or chosen ({@link Zones#NO_RACK}: none), else null.
 */
record Placement(int[] consumer, int[][] held, Map<String, Object> outputs, int[] rack) {
    static Placement of(Bins bins, Map<String, Object> outputs) {
        int[] consumer = java.util.Arrays.copyOf(bins.ids, bins.count);
        int[][] held = new int[bins.count][];
        for (int b = 0; b < bins.count; b++) {
            held[b] = bins.heldOf(b);
        }
        return new Placement(consumer, held, outputs, null);
    }
}
