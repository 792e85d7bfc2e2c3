package io.groupfit.kafka;

import java.util.AbstractMap;
import java.util.AbstractSet;
import java.util.Arrays;
import java.util.Iterator;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import org.apache.kafka.common.Uuid;

/**
 * A member's assignment as {@link GroupfitBrokerAssignor} answers it where it changed: topic id → partition numbers,
 * immutable, on arrays. The numbers are one array, a run of ascending numbers per topic, the runs in the order of the
 * group's topics; each topic's set is a {@link PartitionSet} on its run, made when read. One object and three
 * arrays a member, where a {@code HashMap} holds a table, a node and a set per topic. Equal to any map of the same
 * topics and numbers (and with the same hash code).
 */
final class MemberPartitions extends AbstractMap<Uuid, Set<Integer>> {
    private final Uuid[] topicIds;
    private final Map<Uuid, Integer> topicOf;
    private final int[] numbers;
    private final int[] runTopic;
    private final int[] runEnd;
    private final int runs;

    /**
     * Run k holds topic {@code topicIds[runTopic[k]]}'s numbers, {@code numbers[runEnd[k - 1]..runEnd[k])} (from 0
     * for the first), with {@code runTopic} ascending; {@code topicOf} gives each topic id's index in {@code
     * topicIds}. The arrays are kept, not copied.
     */
    MemberPartitions(Uuid[] topicIds, Map<Uuid, Integer> topicOf, int[] numbers, int[] runTopic, int[] runEnd,
            int runs) {
        this.topicIds = topicIds;
        this.topicOf = topicOf;
        this.numbers = numbers;
        this.runTopic = runTopic;
        this.runEnd = runEnd;
        this.runs = runs;
    }

    private PartitionSet run(int k) {
        return new PartitionSet(numbers, k == 0 ? 0 : runEnd[k - 1], runEnd[k]);
    }

    private int runOf(Object key) {
        Integer t = key instanceof Uuid ? topicOf.get(key) : null;
        return t == null ? -1 : Arrays.binarySearch(runTopic, 0, runs, t);
    }

    @Override
    public Set<Integer> get(Object key) {
        int k = runOf(key);
        return k < 0 ? null : run(k);
    }

    @Override
    public boolean containsKey(Object key) {
        return runOf(key) >= 0;
    }

    @Override
    public int size() {
        return runs;
    }

    @Override
    public Set<Entry<Uuid, Set<Integer>>> entrySet() {
        return new AbstractSet<>() {
            @Override
            public int size() {
                return runs;
            }

            @Override
            public Iterator<Entry<Uuid, Set<Integer>>> iterator() {
                return new Iterator<>() {
                    private int next;

                    @Override
                    public boolean hasNext() {
                        return next < runs;
                    }

                    @Override
                    public Entry<Uuid, Set<Integer>> next() {
                        if (next == runs) {
                            throw new NoSuchElementException();
                        }
                        int k = next++;
                        return new SimpleImmutableEntry<>(topicIds[runTopic[k]], run(k));
                    }
                };
            }
        };
    }
}
