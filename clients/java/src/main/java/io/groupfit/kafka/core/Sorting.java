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
        int n = items.length;
        if (n < 2) {
            return;
        }
        int[] from = items;
        int[] to = new int[n];
        int[] count = new int[257];
        for (int shift = 0; shift < 64; shift += 8) {
            java.util.Arrays.fill(count, 0);
            for (int item : from) {
                count[(int) (key[item] >>> shift & 0xff) + 1]++;
            }
            if (count[(int) (key[from[0]] >>> shift & 0xff) + 1] == n) {
                continue; // every item has this byte: the pass would change nothing
            }
            for (int b = 0; b < 256; b++) {
                count[b + 1] += count[b];
            }
            for (int item : from) {
                to[count[(int) (key[item] >>> shift & 0xff)]++] = item;
            }
            int[] swap = from;
            from = to;
            to = swap;
        }
        if (from != items) {
            System.arraycopy(from, 0, items, 0, n);
        }
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
