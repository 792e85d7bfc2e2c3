package io.groupfit.kafka.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Hand-worked cases of the core's zone mode (each the Python reference's answer to the same request);
 * tests/integration/test_java_core.py compares it with the reference on random zone-aware instances.
 */
class ZonesTest {
    /** Partitions t/0.. with these rates and racks (one each; null: none), capacity 100; {@code members}: id or
     * id@rack (null: none, the algorithm sizes the group); {@code previousRacks}: without members, the previous
     * consumers' racks. */
    static Problem problem(double[] rates, String[] racks, Map<String, int[]> previous, Map<String, String> previousRacks,
            String... members) {
        Problem.Builder builder = new Problem.Builder(100);
        int t = builder.topic("t");
        for (int p = 0; p < rates.length; p++) {
            builder.partition(t, p, rates[p], Double.NaN);
            if (racks[p] != null) {
                builder.racks(p, List.of(racks[p]));
            }
        }
        for (String member : members) {
            String[] parts = member.split("@");
            int c = builder.consumer(parts[0]);
            builder.member(c, Double.NaN);
            if (parts.length > 1) {
                builder.rack(c, parts[1]);
            }
        }
        previous.forEach((consumer, held) -> {
            int c = builder.consumer(consumer);
            builder.previousConsumer(c);
            for (int p : held) {
                builder.previous(c, p);
            }
        });
        previousRacks.forEach((consumer, rack) -> builder.rack(builder.consumer(consumer), rack));
        return builder.build();
    }

    /** consumer → its rack and cross-zone rate, in the outcome's order. */
    static Map<String, String> racks(Outcome outcome) {
        Map<String, String> racks = new LinkedHashMap<>();
        for (int i = 0; i < outcome.consumerCount(); i++) {
            racks.put(outcome.consumer(i), outcome.zones().rack(i));
        }
        return racks;
    }

    static Map<String, Double> crossZone(Outcome outcome) {
        Map<String, Double> cross = new LinkedHashMap<>();
        for (int i = 0; i < outcome.consumerCount(); i++) {
            cross.put(outcome.consumer(i), outcome.zones().crossZone(i));
        }
        return cross;
    }

    static Outcome solve(String algorithm, Map<String, Object> params, Problem problem) {
        return Algorithm.of(algorithm, params).solve(problem);
    }

    /** Three racks, one consumer of capacity 100 each; rack a's partitions come to 110. */
    private static final double[] SKEWED = {45, 35, 20, 30, 20, 10, 20, 10, 5, 15, 10, 5};
    private static final String[] LEADERS = {"a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c"};

    @Test
    void aZoneWithoutRoomForItsPartitionsSendsTheLeastAcrossZones() {
        Outcome outcome = solve("bfd", Map.of(), problem(SKEWED, LEADERS, Map.of(), Map.of(), "a@a", "b@b", "c@c"));
        assertEquals(Map.of("a", List.of(0, 3, 6), "b", List.of(1, 4, 7, 9, 10), "c", List.of(2, 5, 8, 11)),
                CoreTest.assignment(outcome));
        assertEquals(Map.of("a", "a", "b", "b", "c", "c"), racks(outcome));
        // a's 15 (its smallest that leaves it within 100) is read by b across zones; nothing else crosses
        assertEquals(Map.of("a", 0.0, "b", 15.0, "c", 0.0), crossZone(outcome));
        assertEquals(15.0, outcome.zones().crossZoneRate());
        assertTrue(outcome.overloaded().isEmpty());
    }

    @Test
    void withoutRacksTheSameGroupReadsMostAcrossZones() {
        Outcome outcome = solve("bfd", Map.of(), problem(SKEWED, new String[SKEWED.length], Map.of(), Map.of(),
                "a@a", "b@b", "c@c"));
        assertFalse(outcome.problem().zoneAware()); // no partition names a rack: racks change nothing
        assertNull(outcome.zones());
    }

    @Test
    void aGroupTheAlgorithmSizesStartsItsNewConsumersInTheirPartitionsRacks() {
        Outcome outcome = solve("mwf", Map.of(), problem(new double[] {60, 60, 60}, new String[] {"x", "x", "y"},
                Map.of(), Map.of()));
        assertEquals(Map.of("c0", List.of(0), "c1", List.of(1), "c2", List.of(2)), CoreTest.assignment(outcome));
        assertEquals(Map.of("c0", "x", "c1", "x", "c2", "y"), racks(outcome));
        assertEquals(0.0, outcome.zones().crossZoneRate());
    }

    @Test
    void aConsumerTheBudgetCannotMoveFromKeepsWhatItReadsAcrossZones() {
        Map<String, int[]> previous = CoreTest.previous("m", new int[] {1}, "n", new int[] {0, 2});
        Map<String, String> racks = Map.of("m", "x", "n", "y");
        Outcome outcome = solve("mwf", Map.of("max_moves", 0),
                problem(new double[] {30, 20, 40}, new String[] {"x", "y", "x"}, previous, racks));
        assertEquals(Map.of("m", List.of(1), "n", List.of(0, 2)), CoreTest.assignment(outcome));
        assertEquals(0, outcome.moves());
        assertEquals(Map.of("m", 20.0, "n", 70.0), crossZone(outcome));
        @SuppressWarnings("unchecked")
        Map<String, Object> budget = (Map<String, Object>) outcome.outputs().get("budget");
        assertEquals(3L, budget.get("refused_moves"));
        // without the budget the group closes to one consumer (consumers before cross-zone rate), in rack x
        Outcome free = solve("mwf", Map.of(), problem(new double[] {30, 20, 40}, new String[] {"x", "y", "x"},
                previous, racks));
        assertEquals(Map.of("c0", List.of(0, 1, 2)), CoreTest.assignment(free));
        assertEquals(Map.of("c0", "x"), racks(free));
        assertEquals(20.0, free.zones().crossZoneRate());
    }

    @Test
    void aMemberWithoutARackReadsEverythingAcrossZonesAndNamesNoRack() {
        Outcome outcome = solve("mwf", Map.of(), problem(new double[] {30, 20, 40}, new String[] {"x", "y", "x"},
                CoreTest.previous("m", new int[] {0, 1}, "n", new int[] {2}), Map.of(), "m@x", "n"));
        assertEquals(Map.of("m", List.of(0, 1, 2), "n", List.of()), CoreTest.assignment(outcome));
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("m", "x");
        expected.put("n", null);
        assertEquals(expected, racks(outcome));
        assertEquals(20.0, outcome.zones().crossZoneRate());
    }

    @Test
    void membersWithoutAnyRackAreNotZoneAware() {
        Problem problem = problem(new double[] {30, 20}, new String[] {"x", "y"}, Map.of(), Map.of(), "m", "n");
        assertFalse(problem.zoneAware());
        assertEquals(List.of(), problem.racks(0));
    }

    @Test
    void racksAreCheckedAsTheServiceChecksThem() {
        assertThrows(IllegalArgumentException.class, () -> problem(new double[] {1}, new String[] {"x"}, Map.of(),
                Map.of("stranger", "x"), "m@x")); // a rack for a consumer that is not a member
        Problem.Builder builder = new Problem.Builder(100);
        int j = builder.partition(builder.topic("t"), 0, 1, Double.NaN);
        assertThrows(IllegalArgumentException.class, () -> builder.racks(j, Collections.nCopies(33, "x")));
        assertThrows(IllegalArgumentException.class, () -> builder.racks(j, List.of("")));
        assertThrows(IllegalArgumentException.class, () -> builder.rack(builder.consumer("m"), "r".repeat(256)));
    }
}
