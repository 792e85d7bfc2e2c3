package io.groupfit.kafka;

import java.util.AbstractSet;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * The partition numbers of one topic that a member is assigned, immutable, on a sorted int array: what
 * {@link GroupfitBrokerAssignor} answers where a member's assignment changed. Four bytes a partition and nothing
 * boxed until read, where a {@code HashSet<Integer>} holds a node and an Integer per partition; {@code contains} is
 * a binary search. Equal to any {@code Set<Integer>} of the same numbers (and with the same hash code).
 */
final class PartitionSet extends AbstractSet<Integer> {
    private final int[] sorted;

    /** {@code sorted}: ascending, no number twice; kept (not copied). */
    PartitionSet(int[] sorted) {
        this.sorted = sorted;
    }

    @Override
    public int size() {
        return sorted.length;
    }

    @Override
    public boolean contains(Object o) {
        return o instanceof Integer number && Arrays.binarySearch(sorted, number) >= 0;
    }

    @Override
    public Iterator<Integer> iterator() {
        return new Iterator<>() {
            private int next;

            @Override
            public boolean hasNext() {
                return next < sorted.length;
            }

            @Override
            public Integer next() {
                if (next == sorted.length) {
                    throw new NoSuchElementException();
                }
                return sorted[next++];
            }
        };
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PartitionSet other ? Arrays.equals(sorted, other.sorted) : super.equals(o);
    }

    @Override
    public int hashCode() {
        int sum = 0; // Set's contract: the sum of the elements' hash codes, an Integer's being its value
        for (int number : sorted) {
            sum += number;
        }
        return sum;
    }
}
