package io.groupfit.kafka.core;

import java.util.Arrays;

/**
 * Which consumer a new bin is: h(j,k) of Landau et al. Eq. 14 with f(k) of Eq. 12, as
 * {@code app.core.bins.ConsumerPool}. Without members (autoscale) ids are minted c0, c1, …, f(k) the lowest not
 * open; with members only members may be opened, f(k) is the free member of the largest capacity (lowest id among
 * equals), and once all are open the pool mints surplus bins of capacity C that the solver folds into the members.
 */
final class Pool {
    static final int NONE = -1;

    private final Consumers consumers;
    /** Members by capacity, largest first, then natural order; null: any id (autoscale). */
    final int[] members;
    private boolean[] opened;
    private int next;
    private long minted;

    Pool(Consumers consumers, int[] members) {
        this.consumers = consumers;
        if (members != null) {
            int[] sorted = members.clone();
            long[] largestFirst = new long[consumers.size()];
            for (int c : sorted) {
                largestFirst[c] = ~Sorting.ordered(consumers.cap(c));
            }
            consumers.sort(sorted, sorted.length);
            Sorting.byKey(sorted, largestFirst);
            this.members = sorted;
        } else {
            this.members = null;
        }
        opened = new boolean[Math.max(consumers.size(), 4)];
    }

    boolean allowed(int c) {
        return members == null || consumers.isMember(c);
    }

    private boolean isOpen(int c) {
        return c < opened.length && opened[c];
    }

    /** h(j,k): the preferred (previous) consumer if allowed and not open yet, else f(k). */
    int open(int preferred) {
        int c = preferred == NONE || isOpen(preferred) || !allowed(preferred) ? lowestUnused() : preferred;
        if (c >= opened.length) {
            opened = Arrays.copyOf(opened, Math.max(c + 1, opened.length * 2));
        }
        opened[c] = true;
        return c;
    }

    /** f(k), Eq. 12. */
    private int lowestUnused() {
        String prefix;
        if (members != null) {
            while (next < members.length && isOpen(members[next])) {
                next++;
            }
            if (next < members.length) {
                return members[next];
            }
            prefix = Consumers.SURPLUS_PREFIX;
        } else {
            prefix = Consumers.MINTED_PREFIX;
        }
        while (true) {
            int c = consumers.minted(prefix, minted);
            if (!isOpen(c) && !consumers.isMember(c)) {
                return c;
            }
            minted++;
        }
    }
}
