package io.groupfit.kafka.core;

/**
 * What one consumer held, immutable, made by {@link Partitions#holding}: its partitions in the decreasing order
 * (Algorithm 1's line 5) and their running sums, {@code sums[i]} = the rates of the first i added one by one from
 * 0.0 in that order. MWF's size of a consumer (its cumulative rate, as the reference's sequential {@code sum}) is
 * {@code sums[size]}; a bin opened for it and filled largest first holds, after i partitions, exactly
 * {@code sums[i]} (the same additions in the same order), so the fill is a binary search. A caller that meets the
 * same holding again (the member's assignment did not change) passes the same object and nothing is recomputed.
 */
public final class Holding {
    final Partitions partitions;
    final int[] decreasing;
    final double[] sums;

    Holding(Partitions partitions, int[] decreasing, double[] sums) {
        this.partitions = partitions;
        this.decreasing = decreasing;
        this.sums = sums;
    }

    public int size() {
        return decreasing.length;
    }

    /** Its i-th partition (index j) in the decreasing order. */
    public int partition(int i) {
        return decreasing[i];
    }

    /** The partitions it was made from. */
    public Partitions partitions() {
        return partitions;
    }

    /** The number of partitions, from the largest, that a bin of this limit takes before the first that does not
     * fit ({@code Bins.fill} on a new bin): at least one, at most {@code end}. */
    int fits(int end, double limit) {
        // sums[i + 1] = sums[i] + rate of the i-th: the i-th fits while it is at most the limit (the first always)
        int low = 1;
        int high = end;
        while (low < high) {
            int middle = (low + high) >>> 1;
            if (sums[middle + 1] > limit) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        return low;
    }
}
