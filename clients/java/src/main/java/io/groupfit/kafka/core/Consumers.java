package io.groupfit.kafka.core;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Every consumer id of one problem as a small integer: the known ones (members, previous consumers) first, then
 * the ids the pool mints (c&lt;n&gt;, surplus-&lt;n&gt;). {@code tie(c)} orders ids as their natural order does
 * ({@link Natural}, which orders no two distinct ids alike: "c7" and "c07" by the ids themselves).
 */
final class Consumers {
    static final String MINTED_PREFIX = "c";
    static final String SURPLUS_PREFIX = "surplus-";

    final double capacity;
    private final List<String> names;
    private final Map<String, Integer> byName;
    private long[] tie;
    private double[] cap;
    private boolean[] member;
    private final int known;
    /** The known ids in natural order. */
    private final int[] sortedKnown;

    /**
     * {@code own[c]}: the capacity of known consumer c (C when it has none of its own). The list and the map are
     * taken over (minted ids are added to them).
     */
    Consumers(List<String> names, Map<String, Integer> byName, double[] own, boolean[] member, double capacity) {
        this.names = names;
        this.byName = byName;
        this.capacity = capacity;
        this.known = names.size();
        this.cap = Arrays.copyOf(own, Math.max(known, 1));
        this.member = Arrays.copyOf(member, Math.max(known, 1));
        this.tie = new long[Math.max(known, 1)];
        sortedKnown = new int[known];
        // Ids given in natural order (as the broker assignor keeps them) are checked with one comparison each.
        boolean ordered = true;
        for (int c = 0; c < known; c++) {
            sortedKnown[c] = c;
            ordered &= c == 0 || Natural.compare(names.get(c - 1), names.get(c)) < 0;
        }
        if (!ordered) {
            Sorting.stable(sortedKnown, (a, b) -> Natural.compare(this.names.get(a), this.names.get(b)));
        }
        // Natural.compare is zero only for equal ids, so each known id has a rank of its own.
        for (int i = 0; i < known; i++) {
            tie[sortedKnown[i]] = (2L * i + 1) << 32;
        }
    }

    int size() {
        return names.size();
    }

    int known() {
        return known;
    }

    String name(int c) {
        return names.get(c);
    }

    long tie(int c) {
        return tie[c];
    }

    double cap(int c) {
        return cap[c];
    }

    boolean isMember(int c) {
        return member[c];
    }

    /** Sorts consumer indices by natural order (a radix sort by tie). */
    void sort(int[] ids, int length) {
        Sorting.byKey(ids, length, tie);
    }

    /** The id {@code prefix<n>}: a known one if it is known, else a new entry of capacity C. */
    int minted(String prefix, long n) {
        String name = prefix + n;
        Integer existing = byName.get(name);
        if (existing != null) {
            return existing;
        }
        // Its place among the known ids (a known id equal to it was found above): between two of them, after the
        // ids minted there before it (n grows, and so does the natural order of prefix<n>).
        int low = 0;
        int high = known;
        while (low < high) {
            int middle = (low + high) >>> 1;
            if (Natural.compare(names.get(sortedKnown[middle]), name) < 0) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        long newTie = ((2L * low) << 32) | n;
        int c = names.size();
        if (c == tie.length) {
            int grown = Math.max(4, c * 2);
            tie = Arrays.copyOf(tie, grown);
            cap = Arrays.copyOf(cap, grown);
            member = Arrays.copyOf(member, grown);
        }
        tie[c] = newTie;
        cap[c] = capacity;
        member[c] = false;
        names.add(name);
        byName.put(name, c);
        return c;
    }
}
