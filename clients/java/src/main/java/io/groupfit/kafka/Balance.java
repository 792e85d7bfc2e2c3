package io.groupfit.kafka;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

/** Balanced counts, previous owners kept: the assignment when nothing is known of the rates. */
public final class Balance {
    private Balance() {}

    /**
     * Counts differ by at most one (the extra partitions go to the members that held most, ties by the given
     * order, so fewer move); a partition stays with its last owner while that owner is under its share; the rest
     * go to the member holding fewest, ties by order. Deterministic for a given input order.
     */
    public static <K> Map<K, String> sticky(List<String> members, List<K> partitions, Map<K, String> lastOwner) {
        Map<K, String> owner = new LinkedHashMap<>();
        if (members.isEmpty()) {
            return owner;
        }
        int share = partitions.size() / members.size();
        int extra = partitions.size() % members.size();
        Map<String, Integer> quota = new HashMap<>();
        Map<String, Integer> rank = new HashMap<>();
        Map<String, Integer> count = new HashMap<>();
        Map<String, Integer> held = new HashMap<>();
        for (int i = 0; i < members.size(); i++) {
            rank.put(members.get(i), i);
            count.put(members.get(i), 0);
            held.put(members.get(i), 0);
        }
        for (K partition : partitions) {
            held.computeIfPresent(lastOwner.get(partition), (m, n) -> n + 1);
        }
        List<String> byHeld = new ArrayList<>(members);
        byHeld.sort(Comparator.comparing((String m) -> -held.get(m)).thenComparing(rank::get));
        for (int i = 0; i < byHeld.size(); i++) {
            quota.put(byHeld.get(i), share + (i < extra ? 1 : 0));
        }
        for (K partition : partitions) {
            String previous = lastOwner.get(partition);
            if (previous != null && count.containsKey(previous) && count.get(previous) < quota.get(previous)) {
                owner.put(partition, previous);
                count.merge(previous, 1, Integer::sum);
            }
        }
        PriorityQueue<String> open = new PriorityQueue<>((a, b) -> count.get(a).equals(count.get(b))
                ? Integer.compare(rank.get(a), rank.get(b))
                : Integer.compare(count.get(a), count.get(b)));
        for (String member : members) {
            if (count.get(member) < quota.get(member)) {
                open.add(member);
            }
        }
        for (K partition : partitions) {
            if (!owner.containsKey(partition)) {
                String member = open.poll();
                owner.put(partition, member);
                count.merge(member, 1, Integer::sum);
                if (count.get(member) < quota.get(member)) {
                    open.add(member);
                }
            }
        }
        return owner;
    }
}
