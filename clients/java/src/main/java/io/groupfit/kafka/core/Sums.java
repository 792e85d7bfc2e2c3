package io.groupfit.kafka.core;

import java.util.Arrays;

/** Python's math.fsum: the correctly rounded sum (Shewchuk's partials, with CPython's half-even fix-up). */
final class Sums {
    private Sums() {}

    /** The exact sum of {@code values[indices[i]]} for i below count (of {@code values[i]} when indices is null). */
    static double fsum(double[] values, int[] indices, int count) {
        double[] partials = new double[8];
        int size = 0;
        for (int k = 0; k < count; k++) {
            double x = values[indices == null ? k : indices[k]];
            int i = 0;
            for (int p = 0; p < size; p++) {
                double y = partials[p];
                if (Math.abs(x) < Math.abs(y)) {
                    double swap = x;
                    x = y;
                    y = swap;
                }
                double hi = x + y;
                double lo = y - (hi - x);
                if (lo != 0.0) {
                    partials[i++] = lo;
                }
                x = hi;
            }
            size = i;
            if (size == partials.length) {
                partials = Arrays.copyOf(partials, size * 2);
            }
            partials[size++] = x;
        }
        double hi = 0.0;
        int n = size;
        if (n > 0) {
            hi = partials[--n];
            double lo = 0.0;
            while (n > 0) {
                double x = hi;
                double y = partials[--n];
                hi = x + y;
                double yr = hi - x;
                lo = y - yr;
                if (lo != 0.0) {
                    break;
                }
            }
            if (n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0))) {
                double y = lo * 2.0;
                double x = hi + y;
                double yr = x - hi;
                if (y == yr) {
                    hi = x;
                }
            }
        }
        return hi;
    }
}
