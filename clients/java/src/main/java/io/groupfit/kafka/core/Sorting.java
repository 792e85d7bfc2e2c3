package io.groupfit.kafka.core;

/** Sorts on primitive arrays (no boxing): a stable radix sort by 64-bit keys and a stable merge sort. */
final class Sorting {
    private Sorting() {}

    /** Orders two ints; a lambda over the caller's arrays. */
    @FunctionalInterface
    interface IntOrder {
        int compare(int a, int b);
    }

    /**
     * Sorts {@code items} (indices into {@code key}) by {@code key[item]} as unsigned 64-bit numbers, stably: LSD
     * radix, 8 bits a pass, a pass skipped when every item has the same byte there. O(n).
     */
    static void byKey(int[] items, long[] key) {
        byKey(items, items.length, key);
    }

    /** {@link #byKey(int[], long[])} on {@code items[0..n)}. */
    static void byKey(int[] items, int n, long[] key) {
        if (n < 2) {
            return;
        }
        // Every byte's histogram in one pass; a byte that all items share needs no pass of its own.
        int[][] count = new int[8][257];
        for (int i = 0; i < n; i++) {
            long k = key[items[i]];
            for (int b = 0; b < 8; b++) {
                count[b][(int) (k >>> (8 * b) & 0xff) + 1]++;
            }
        }
        int[] from = items;
        int[] to = null;
        for (int b = 0; b < 8; b++) {
            int[] histogram = count[b];
            int shift = 8 * b;
            if (histogram[(int) (key[from[0]] >>> shift & 0xff) + 1] == n) {
                continue; // every item has this byte: the pass would change nothing
            }
            for (int v = 0; v < 256; v++) {
                histogram[v + 1] += histogram[v];
            }
            if (to == null) {
                to = new int[n];
            }
            for (int i = 0; i < n; i++) {
                int item = from[i];
                to[histogram[(int) (key[item] >>> shift & 0xff)]++] = item;
            }
            int[] swap = from;
            from = to;
            to = swap;
        }
        if (from != items) {
            System.arraycopy(from, 0, items, 0, n);
        }
    }

    /**
     * The indices of {@code byKey} (partitions in (topic, partition) order) sorted by rate, largest first, ties in
     * that order. Rates are at least 0, so a rate's bits grow with its value: each item is one long, the bits'
     * complement with its low bits replaced by the item's place in {@code byKey}, sorted as unsigned by {@link
     * #byKey} (radix: linear where a comparison sort is n log n); items whose rates differ only in those low bits are
     * put in order after.
     */
    static int[] decreasing(double[] rate, int[] byKey) {
        int n = byKey.length;
        int low = 64 - Long.numberOfLeadingZeros(Math.max(n - 1, 1));
        long mask = (1L << low) - 1;
        long[] packed = new long[n];
        int[] places = new int[n];
        for (int rank = 0; rank < n; rank++) {
            long complement = ~Double.doubleToRawLongBits(rate[byKey[rank]]);
            packed[rank] = (complement & ~mask) | rank;
            places[rank] = rank;
        }
        byKey(places, packed);
        int[] order = new int[n];
        for (int i = 0; i < n; i++) {
            order[i] = byKey[places[i]];
        }
        for (int from = 0; from < n; ) {
            int to = from + 1;
            while (to < n && (packed[places[to]] & ~mask) == (packed[places[from]] & ~mask)) {
                to++;
            }
            if (to - from > 1) {
                // equal high bits: by the full rate, largest first, ties (already) in key order
                for (int i = from + 1; i < to; i++) {
                    int item = order[i];
                    int k = i - 1;
                    while (k >= from && rate[order[k]] < rate[item]) {
                        order[k + 1] = order[k];
                        k--;
                    }
                    order[k + 1] = item;
                }
            }
            from = to;
        }
        return order;
    }

    /** Sorts {@code items[0..length)} stably by {@code order} (merge sort; insertion sort for short runs). */
    static void stable(int[] items, int length, IntOrder order) {
        if (length < 2) {
            return;
        }
        int[] buffer = new int[length];
        mergeSort(items, buffer, 0, length, order);
    }

    static void stable(int[] items, IntOrder order) {
        stable(items, items.length, order);
    }

    private static void mergeSort(int[] a, int[] buffer, int from, int to, IntOrder order) {
        if (to - from <= 16) {
            for (int i = from + 1; i < to; i++) {
                int item = a[i];
                int k = i - 1;
                while (k >= from && order.compare(a[k], item) > 0) {
                    a[k + 1] = a[k];
                    k--;
                }
                a[k + 1] = item;
            }
            return;
        }
        int middle = (from + to) >>> 1;
        mergeSort(a, buffer, from, middle, order);
        mergeSort(a, buffer, middle, to, order);
        if (order.compare(a[middle - 1], a[middle]) <= 0) {
            return;
        }
        System.arraycopy(a, from, buffer, from, to - from);
        int i = from;
        int j = middle;
        for (int k = from; k < to; k++) {
            if (j >= to || (i < middle && order.compare(buffer[i], buffer[j]) <= 0)) {
                a[k] = buffer[i++];
            } else {
                a[k] = buffer[j++];
            }
        }
    }

    /** Python's comparison of two floats: -0.0 and 0.0 are equal (Double.compare tells them apart). */
    static int compare(double a, double b) {
        return a < b ? -1 : a > b ? 1 : 0;
    }

    /** A float's bits made to sort as the float does, as unsigned (finite values; -0.0 as 0.0). */
    static long ordered(double x) {
        long bits = x == 0.0 ? 0L : Double.doubleToRawLongBits(x);
        return bits < 0 ? ~bits : bits | Long.MIN_VALUE;
    }
}
