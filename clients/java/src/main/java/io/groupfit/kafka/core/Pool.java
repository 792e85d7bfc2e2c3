package io.groupfit.kafka.core;

import java.util.Arrays;

/**
 * Which consumer a new bin is: h(j,k) of Landau et al. Eq. 14 with f(k) of Eq. 12, as
 * {@code app.core.bins.ConsumerPool}. Without members (autoscale) ids are minted c0, c1, …, f(k) the lowest not
 * open; with members only members may be opened, f(k) is the free member of the largest capacity (lowest id among
 * equals), and once all are open the pool mints surplus bins of capacity C that the solver folds into the members.
 *
 * <p>Zone mode ({@link #zoned}, as {@code app.core.bins.ZonePool}): the pool also opens a consumer in a given rack
 * ({@link #openIn}) or in one of a partition's racks ({@link #openFor}). With members: the free member of that rack,
 * the largest capacity first, the lowest id among equals; none when every member there is open. Without members: the
 * previous consumer of that rack not open yet (a pod does not change zone) or a new id no previous consumer has, the
 * lower of the two; a new id takes the rack it is opened in. A consumer opened without a rack has its known rack.
 */
final class Pool {
    static final int NONE = -1;

    private final Consumers consumers;
    /** Members by capacity, largest first, then natural order; null: any id (autoscale). */
    final int[] members;
    private boolean[] opened;
    private int next;
    private long minted;
    // zone mode: each consumer's rack (known, or chosen when opened in one), the open consumers per rack, the known
    // consumers of each rack in the pool's order and the next one not open yet, the next fresh id to try
    private Zones zones;
    private int[] racks;
    int[] inRack;
    private int[][] knownInRack;
    private int[] rackNext;
    private long fresh;

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

    /** The zone mode of this pool: {@code previousIds} are the previous consumers. */
    Pool zoned(Zones zones, int[] previousIds) {
        this.zones = zones;
        int[] known = members;
        if (known == null) {
            known = previousIds.clone();
            consumers.sort(known, known.length);
        }
        int count = zones.racks();
        int[] perRack = new int[count];
        for (int c : known) {
            if (zones.rackOf(c) != Zones.NO_RACK) {
                perRack[zones.rackOf(c)]++;
            }
        }
        knownInRack = new int[count][];
        for (int r = 0; r < count; r++) {
            knownInRack[r] = new int[perRack[r]];
            perRack[r] = 0;
        }
        for (int c : known) {
            int rack = zones.rackOf(c);
            if (rack != Zones.NO_RACK) {
                knownInRack[rack][perRack[rack]++] = c;
            }
        }
        rackNext = new int[count];
        inRack = new int[count];
        racks = new int[Math.max(consumers.size(), 4)];
        for (int c = 0; c < racks.length; c++) {
            racks[c] = zones.rackOf(c);
        }
        return this;
    }

    /** Zone mode: a consumer's rack, known or chosen when it was opened (NO_RACK: none). */
    int rackOf(int c) {
        return racks != null && c < racks.length ? racks[c] : Zones.NO_RACK;
    }

    private void setRack(int c, int rack) {
        if (c >= racks.length) {
            int old = racks.length;
            racks = Arrays.copyOf(racks, Math.max(c + 1, old * 2));
            Arrays.fill(racks, old, racks.length, Zones.NO_RACK);
        }
        racks[c] = rack;
    }

    /** A new consumer's rack, chosen again ({@code SearchState.rerack}). */
    void move(int c, int rack) {
        int old = rackOf(c);
        if (old != Zones.NO_RACK) {
            inRack[old]--;
        }
        setRack(c, rack);
        inRack[rack]++;
    }

    /** The next known consumer of {@code rack} not open yet (members: the largest first), or NONE. */
    private int freeIn(int rack) {
        int[] queue = knownInRack[rack];
        int i = rackNext[rack];
        while (i < queue.length && isOpen(queue[i])) {
            i++;
        }
        rackNext[rack] = i;
        return i < queue.length ? queue[i] : NONE;
    }

    private boolean canOpen(int c) {
        return !isOpen(c) && allowed(c);
    }

    /** Whether a consumer can be opened in one of {@code racks}. */
    boolean canOpenFor(int[] racks) {
        if (members == null) {
            return racks.length > 0;
        }
        for (int r : racks) {
            if (freeIn(r) != NONE) {
                return true;
            }
        }
        return false;
    }

    /**
     * A consumer opened in one of {@code racks} (a partition's), or NONE: {@code preferred} (its previous consumer)
     * if it runs there and is not open; else with members the largest free member of those racks (ties: the lowest
     * id), without members one in the rack with the fewest open consumers (ties: the first by name).
     */
    int openFor(int[] racks, int preferred) {
        if (racks.length == 0) {
            return NONE;
        }
        int known = preferred == NONE ? Zones.NO_RACK : rackOf(preferred);
        int rack = -1;
        if (known >= 0 && contains(racks, known) && canOpen(preferred)) {
            rack = known;
        } else if (members != null) {
            int best = NONE;
            for (int r : racks) {
                int c = freeIn(r);
                if (c != NONE && (best == NONE || consumers.cap(c) > consumers.cap(best)
                        || (consumers.cap(c) == consumers.cap(best)
                                && Long.compareUnsigned(consumers.tie(c), consumers.tie(best)) < 0))) {
                    best = c;
                    rack = r;
                }
            }
            if (best == NONE) {
                return NONE;
            }
        } else {
            for (int r : racks) {
                if (rack < 0 || inRack[r] < inRack[rack]) {
                    rack = r;
                }
            }
        }
        return openIn(rack, preferred);
    }

    private static boolean contains(int[] racks, int rack) {
        for (int r : racks) {
            if (r == rack) {
                return true;
            }
        }
        return false;
    }

    /** A consumer opened in {@code rack}: {@code preferred} (a previous consumer there) if it may, else as the class
     * says; NONE when no member is free there. */
    int openIn(int rack, int preferred) {
        int chosen;
        if (preferred != NONE && rackOf(preferred) == rack && canOpen(preferred)) {
            chosen = preferred;
        } else {
            chosen = freeIn(rack);
            if (members == null) {
                int id = freshId();
                if (chosen == NONE || Long.compareUnsigned(consumers.tie(id), consumers.tie(chosen)) < 0) {
                    chosen = id;
                }
            }
            if (chosen == NONE) {
                return NONE;
            }
        }
        markOpen(chosen);
        setRack(chosen, rack);
        inRack[rack]++;
        return chosen;
    }

    /** The lowest c&lt;n&gt; that is neither open nor a known consumer. */
    private int freshId() {
        while (true) {
            int c = consumers.minted(Consumers.MINTED_PREFIX, fresh);
            if (!isOpen(c) && c >= consumers.known()) {
                return c;
            }
            fresh++;
        }
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
        markOpen(c);
        if (zones != null && rackOf(c) != Zones.NO_RACK) {
            inRack[rackOf(c)]++;
        }
        return c;
    }

    private void markOpen(int c) {
        if (c >= opened.length) {
            opened = Arrays.copyOf(opened, Math.max(c + 1, opened.length * 2));
        }
        opened[c] = true;
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
