package io.groupfit.kafka;

import java.util.AbstractSet;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * The partition numbers of one topic that a member is assigned, immutable, on a range of a sorted int array: what
 * {@link GroupfitBrokerAssignor} answers where a member's assignment changed. Four bytes a partition and nothing
 * boxed until read, where a {@code HashSet<Integer>} holds a node and an Integer per partition; {@code contains} is
 * a binary search. Equal to any {@code Set<Integer>} of the same numbers (and with the same hash code).
 */
final class PartitionSet extends AbstractSet<Integer> {
    private final int[] sorted;
    private final int from;
    private final int to;

    /** {@code sorted[from..to)}: ascending, no number twice; kept (not copied: sets of one member share an array). */
    PartitionSet(int[] sorted, int from, int to) {
        this.sorted = sorted;
        this.from = from;
        this.to = to;
    }

    @Override
    public int size() {
        return to - from;
    }

    @Override
    public boolean contains(Object o) {
        return o instanceof Integer number && Arrays.binarySearch(sorted, from, to, number) >= 0;
    }

    @Override
    public Iterator<Integer> iterator() {
        return new Iterator<>() {
            private int next = from;

            @Override
            public boolean hasNext() {
                return next < to;
            }

            @Override
            public Integer next() {
                if (next == to) {
                    throw new NoSuchElementException();
                }
                return sorted[next++];
            }
        };
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PartitionSet other ? Arrays.equals(sorted, from, to, other.sorted, other.from, other.to)
                : super.equals(o);
    }

    @Override
    public int hashCode() {
        int sum = 0; // Set's contract: the sum of the elements' hash codes, an Integer's being its value
        for (int k = from; k < to; k++) {
            sum += sorted[k];
        }
        return sum;
    }
}
