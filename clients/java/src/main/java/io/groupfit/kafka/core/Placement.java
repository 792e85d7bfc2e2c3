package io.groupfit.kafka.core;

import java.util.Map;

/**
 * What an algorithm returns: bins (consumer, its partitions) in the order they were opened, and its outputs; in zone
 * mode each bin's rack, known or chosen ({@link Zones#NO_RACK}: none), else null. {@code tally}: what the bins
 * counted as partitions went in, or null where the algorithm took partitions out again.
 */
record Placement(int[] consumer, int[][] held, Map<String, Object> outputs, int[] rack, Tally tally) {
    Placement(int[] consumer, int[][] held, Map<String, Object> outputs, int[] rack) {
        this(consumer, held, outputs, rack, null);
    }

    /**
     * Per bin, its load (its rates added in the order placed, from 0.0: the sum {@link Outcome} would make) and how
     * many of its partitions its consumer did not hold before; the partitions that left their previous consumer
     * ({@code moved[0..movedCount)}, in any order).
     */
    record Tally(double[] load, int[] foreign, int[] moved, int movedCount) {}

    static Placement of(Bins bins, Map<String, Object> outputs) {
        int[] consumer = java.util.Arrays.copyOf(bins.ids, bins.count);
        int[][] held = new int[bins.count][];
        for (int b = 0; b < bins.count; b++) {
            held[b] = bins.heldOf(b);
        }
        return new Placement(consumer, held, outputs, null,
                new Tally(bins.load, bins.foreign, bins.moved, bins.movedCount));
    }
}
