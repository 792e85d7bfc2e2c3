package io.groupfit.kafka.core;

/**
 * What a zone-aware outcome says of zones, as {@code app.core.assign.zone_report}: each consumer's rack (the one the
 * algorithm chose, else the one known, else for a new consumer of a group the algorithm sizes the rack where the most
 * of its rate is local; null: none) and the rate each reads across zones (math.fsum), by the outcome's consumer index.
 */
public final class ZoneReport {
    private final String[] racks;
    private final double[] crossZone;
    private final double total;

    private ZoneReport(String[] racks, double[] crossZone) {
        this.racks = racks;
        this.crossZone = crossZone;
        this.total = Sums.fsum(crossZone, null, crossZone.length);
    }

    /** The report of an answer: {@code consumers[i]} holds {@code held[i]}; {@code placement}'s racks are those the
     * algorithm chose (null: it chose none). */
    static ZoneReport of(Problem problem, int[] consumers, int[][] held, Placement placement) {
        Zones zones = problem.zones;
        int[] chosen = new int[problem.consumers.size()];
        java.util.Arrays.fill(chosen, Zones.NO_RACK);
        if (placement.rack() != null) {
            for (int b = 0; b < placement.consumer().length; b++) {
                if (placement.held()[b].length > 0) {
                    chosen[placement.consumer()[b]] = placement.rack()[b];
                }
            }
        }
        boolean[] previous = new boolean[problem.consumers.size()];
        for (int c : problem.previousIds) {
            previous[c] = true;
        }
        String[] racks = new String[consumers.length];
        double[] cross = new double[consumers.length];
        for (int i = 0; i < consumers.length; i++) {
            int c = consumers[i];
            int rack = chosen[c] != Zones.NO_RACK ? chosen[c] : zones.rackOf(c);
            if (rack == Zones.NO_RACK && problem.members == null && !previous[c]) {
                rack = zones.bestRack(problem.rate, held[i], held[i].length);
            }
            racks[i] = rack == Zones.NO_RACK ? null : zones.names[rack];
            cross[i] = zones.crossZone(problem.rate, held[i], held[i].length, rack);
        }
        return new ZoneReport(racks, cross);
    }

    /** The i-th consumer's rack (as {@link Outcome#consumer}), or null where none is known or chosen. */
    public String rack(int i) {
        return racks[i];
    }

    /** The rate the i-th consumer reads across zones. */
    public double crossZone(int i) {
        return crossZone[i];
    }

    /** The rate read across zones in all (math.fsum of the consumers'). */
    public double crossZoneRate() {
        return total;
    }
}
