package io.groupfit.kafka.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Hand-worked cases of the core; tests/integration/test_java_core.py compares it with the reference at large. */
class CoreTest {
    /** Partitions t/0.. with these rates; `previous`: consumer → partition numbers; `members`: id or id:capacity. */
    static Problem problem(double capacity, double[] rates, Map<String, int[]> previous, String... members) {
        Problem.Builder builder = new Problem.Builder(capacity);
        int t = builder.topic("t");
        for (int p = 0; p < rates.length; p++) {
            builder.partition(t, p, rates[p], Double.NaN);
        }
        for (String member : members) {
            String[] parts = member.split(":");
            builder.member(builder.consumer(parts[0]), parts.length > 1 ? Double.parseDouble(parts[1]) : Double.NaN);
        }
        previous.forEach((consumer, held) -> {
            int c = builder.consumer(consumer);
            for (int p : held) {
                builder.previous(c, p);
            }
        });
        return builder.build();
    }

    /** consumer → its partition numbers, in the order placed. */
    static Map<String, List<Integer>> assignment(Outcome outcome) {
        Map<String, List<Integer>> result = new LinkedHashMap<>();
        for (int i = 0; i < outcome.consumerCount(); i++) {
            List<Integer> held = new ArrayList<>();
            for (int j : outcome.partitions(i)) {
                held.add(outcome.problem().partition(j));
            }
            result.put(outcome.consumer(i), held);
        }
        return result;
    }

    static Map<String, int[]> previous(Object... pairs) {
        Map<String, int[]> result = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            result.put((String) pairs[i], (int[]) pairs[i + 1]);
        }
        return result;
    }

    @Test
    void naturalOrderComparesDigitRunsByValue() {
        List<String> ids = new ArrayList<>(List.of("c10", "c2", "b", "c", "c2x", "surplus-3", "c2a1", "", "10", "9",
                "c07", "c7", "c\u0661\u0660"));
        ids.sort(Natural::compare);
        // "c07" and "c7" have equal chunks, so the ids themselves order them; Arabic-Indic ١٠ is ten, as Python's int()
        // reads it, and follows "c10" by code point.
        assertEquals(List.of("", "9", "10", "b", "c", "c2", "c2a1", "c2x", "c07", "c7", "c10", "c\u0661\u0660",
                "surplus-3"), ids);
        assertTrue(Natural.compare("c10", "c\u0661\u0660") < 0);
        assertTrue(Natural.compare("c7", "c07") > 0);
        assertEquals(0, Natural.compare("c7", "c7"));
    }

    @Test
    void mwfKeepsLargePartitionsAndMigratesSmallOnes() {
        // a held 6 + 5 (over 10), b 4 + 3. a is visited first and keeps 6 (5 does not fit beside it); b's 3 migrates
        // into a, b keeps 4; the 5 left over goes to the bin with most room, b: 9 and 9, two moves.
        Problem problem = problem(10, new double[] {6, 5, 4, 3}, previous("a", new int[] {0, 1}, "b", new int[] {2, 3}),
                "a", "b");
        Outcome outcome = Algorithm.of("mwf", Map.of()).solve(problem);
        assertEquals(Map.of("a", List.of(0, 3), "b", List.of(2, 1)), assignment(outcome));
        assertEquals(2, outcome.moves());
        assertEquals(0.8, outcome.rscore(), 1e-15);
        assertEquals(9.0, outcome.load(0));
        assertEquals(List.of(), outcome.overloaded());
    }

    @Test
    void aSpentBudgetLeavesAPartitionWhereItWas() {
        // One move allowed: b's 3 migrates; the 5 would move from a to b but the budget refuses, so a holds 14.
        Problem problem = problem(10, new double[] {6, 5, 4, 3}, previous("a", new int[] {0, 1}, "b", new int[] {2, 3}),
                "a", "b");
        Outcome outcome = Algorithm.of("mwf", Map.of("max_moves", 1)).solve(problem);
        assertEquals(Map.of("a", List.of(0, 3, 1), "b", List.of(2)), assignment(outcome));
        assertEquals(1, outcome.moves());
        assertEquals(0.3, outcome.rscore(), 1e-15);
        @SuppressWarnings("unchecked")
        Map<String, Object> budget = (Map<String, Object>) outcome.outputs().get("budget");
        assertEquals(1L, budget.get("refused_moves"));
        assertEquals(List.of("a"), outcome.overloaded());
        assertEquals(List.of("a"), outcome.outputs().get("overloaded_consumers"));
    }

    @Test
    void surplusBinsAreFoldedIntoTheMembersWithTheMostRoom() {
        // 9 8 7 6 need four bins of 10; two members: the 7 goes to b (8, room 2), then the 6 to a (9, room 1).
        Problem problem = problem(10, new double[] {9, 8, 7, 6}, Map.of(), "a", "b");
        Outcome outcome = Algorithm.of("mwf", Map.of()).solve(problem);
        assertEquals(Map.of("a", List.of(0, 3), "b", List.of(1, 2)), assignment(outcome));
        assertEquals(4, outcome.binsUsed());
        assertEquals(List.of("a", "b"), outcome.overloaded());
    }

    @Test
    void aMemberOfTwiceTheCapacityTakesTwiceTheRate() {
        // a (20) is opened first, as the largest member, and holds 9 + 8 + 2; b (10) holds 7.
        Problem problem = problem(10, new double[] {9, 8, 7, 2}, Map.of(), "b", "a:20");
        Outcome outcome = Algorithm.of("mwf", Map.of()).solve(problem);
        assertEquals(Map.of("a", List.of(0, 1, 3), "b", List.of(2)), assignment(outcome));
        assertEquals(List.of(), outcome.overloaded());
        assertEquals(20.0, problem.capacityOf("a"));
    }

    @Test
    void bestFitDecreasingFillsTheFullestBinThatFits() {
        // 6 → a, 5 → b (a has 4 left), 4 → a (exactly full: least room that fits), 3 → b.
        Problem problem = problem(10, new double[] {6, 5, 4, 3}, Map.of(), "a", "b");
        assertEquals(Map.of("a", List.of(0, 2), "b", List.of(1, 3)),
                assignment(Algorithm.of("bfd", Map.of()).solve(problem)));
        // Worst Fit in request order without members: minted ids c0, c1
        Problem autoscale = problem(10, new double[] {3, 6, 4, 5}, Map.of());
        assertEquals(Map.of("c0", List.of(0, 1), "c1", List.of(2, 3)),
                assignment(Algorithm.of("wf", Map.of()).solve(autoscale)));
    }

    @Test
    void leastLoadedScalesUpWhenTheGroupIsTooSmall() {
        // 4 × 5 at μ·f = 9: two per consumer does not fit (10 > 9), so four consumers; one member: three surplus bins
        // folded back, and the outputs say UP.
        Problem problem = problem(10, new double[] {5, 5, 5, 5}, previous("a", new int[] {0, 1, 2, 3}), "a");
        Outcome outcome = Algorithm.of("least-loaded", Map.of()).solve(problem);
        assertEquals("UP", outcome.outputs().get("scale_action"));
        assertEquals(4, outcome.binsUsed());
        assertEquals(List.of("a"), outcome.consumers());
    }

    @Test
    void badInputIsRefusedWithAReason() {
        IllegalArgumentException twice = assertThrows(IllegalArgumentException.class, () -> {
            Problem.Builder builder = new Problem.Builder(10);
            int t = builder.topic("t");
            builder.partition(t, 1, 1, Double.NaN);
            builder.partition(t, 1, 2, Double.NaN);
            builder.build();
        });
        assertTrue(twice.getMessage().contains("t/1 is listed more than once"), twice.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new Problem.Builder(0));
        assertThrows(IllegalArgumentException.class, () -> problem(10, new double[] {-1}, Map.of()));
        assertThrows(IllegalArgumentException.class, () -> problem(10, new double[] {1}, Map.of(), "a:0"));
        assertThrows(IllegalArgumentException.class, () -> Algorithm.of("repack", Map.of()));
        assertThrows(IllegalArgumentException.class, () -> Algorithm.of("mwf", Map.of("max_move", 1)));
        assertThrows(IllegalArgumentException.class, () -> Algorithm.of("mwf", Map.of("max_moves", 1.5)));
        assertThrows(IllegalArgumentException.class, () -> Algorithm.of("least-loaded", Map.of("f_down", 0.95)));
        assertThrows(IllegalArgumentException.class,
                () -> problem(10, new double[] {1, 1}, previous("a", new int[] {0}, "b", new int[] {0})));
    }

    @Test
    void theSameInputGivesTheSameAnswer() {
        double[] rates = new double[200];
        Arrays.fill(rates, 3.0); // all ties: broken by (topic, partition) and by id
        Problem problem = problem(10, rates, Map.of(), "m1", "m10", "m2", "m07", "m7");
        assertEquals(assignment(Algorithm.of("mwf", Map.of()).solve(problem)),
                assignment(Algorithm.of("mwf", Map.of()).solve(problem)));
        assertEquals(List.of("m1", "m2", "m07", "m7", "m10"), Algorithm.of("wfd", Map.of()).solve(problem).consumers());
    }

    /**
     * The loads, moves, Rscore and unchanged consumers an outcome reports (taken from the placement's tally where it
     * has one) are those of its assignment: each consumer's rates summed in its order, the partitions held before by
     * another consumer, exactly the partitions it held before. Random groups with members that stay, leave and join,
     * new partitions, surplus bins folded, budgets, every algorithm, with and without racks.
     */
    @Test
    void theOutcomeReportsWhatItsAssignmentIs() {
        Random random = new Random(7);
        for (int round = 0; round < 400; round++) {
            int n = 1 + random.nextInt(60);
            boolean zoned = round % 4 == 3;
            Problem.Builder builder = new Problem.Builder(10 + random.nextInt(20));
            int t = builder.topic("t");
            for (int p = 0; p < n; p++) {
                builder.partition(t, p, random.nextInt(4) == 0 ? 0.0 : random.nextInt(12) + random.nextDouble(), Double.NaN);
                if (zoned) {
                    builder.racks(p, List.of("r" + random.nextInt(3)));
                }
            }
            int before = random.nextInt(6);
            int members = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(6);
            java.util.Set<Integer> added = new java.util.HashSet<>();
            for (int m = 0; m < members; m++) {
                int c = builder.consumer("m" + (m + random.nextInt(2) * before));
                if (added.add(c)) {
                    builder.member(c, random.nextBoolean() ? Double.NaN : 5 + random.nextInt(30));
                    if (zoned) {
                        builder.rack(c, "r" + random.nextInt(3));
                    }
                }
            }
            for (int p = 0; p < n && before > 0; p++) {
                if (random.nextInt(5) > 0) { // else a new partition
                    builder.previous(builder.consumer("m" + random.nextInt(before)), p);
                }
            }
            Problem problem = builder.build();
            String name = new ArrayList<>(Algorithm.NAMES).get(round % Algorithm.NAMES.size());
            Map<String, Object> params = name.startsWith("m") && random.nextBoolean()
                    ? Map.of("max_moves", random.nextInt(5)) : Map.of();
            Outcome outcome = Algorithm.of(name, params).solve(problem);
            int moves = 0;
            double moved = 0;
            for (int i = 0; i < outcome.consumerCount(); i++) {
                double load = 0.0;
                int kept = 0;
                for (int j : outcome.partitions(i)) {
                    load += problem.rate(j);
                    String was = problem.previousOwner(j);
                    if (outcome.consumer(i).equals(was)) {
                        kept++;
                    } else if (was != null) {
                        moves++;
                        moved += problem.rate(j);
                    }
                    assertEquals(i, outcome.ownerIndex(j));
                }
                assertEquals(load, outcome.load(i), name + " round " + round);
                int heldBefore = 0;
                for (int j = 0; j < n; j++) {
                    heldBefore += outcome.consumer(i).equals(problem.previousOwner(j)) ? 1 : 0;
                }
                assertEquals(kept == outcome.partitions(i).length && heldBefore == kept, outcome.unchanged(i),
                        name + " round " + round + " consumer " + outcome.consumer(i));
            }
            assertEquals(moves, outcome.moves(), name + " round " + round);
            assertEquals(moved / problem.capacity(), outcome.rscore(), 1e-9);
        }
    }

    /**
     * Worst Fit's runs ({@link Bins#placeAll}: the bin with the most room takes the next partitions while it keeps more
     * room than the runner-up, the heap updated once per run) open the same bins and fill them with the same
     * partitions in the same order, to the same loads, as placing one by one. Forming groups of hundreds to
     * thousands of partitions, rates with many ties (room equal to the runner-up's: the tie, then the id decides) or
     * none, members of mixed capacities or none; in the decreasing order and in request order.
     */
    @Test
    void worstFitsRunsPlaceAsOneByOne() {
        Random random = new Random(11);
        for (int round = 0; round < 300; round++) {
            int n = 1 + random.nextInt(round % 10 == 0 ? 5000 : 400);
            double capacity = 10 + random.nextInt(40);
            boolean ties = random.nextBoolean();
            Problem.Builder builder = new Problem.Builder(capacity);
            int t = builder.topic("t");
            for (int p = 0; p < n; p++) {
                double rate = ties ? random.nextInt(6) * capacity / 20 : random.nextDouble() * capacity * random.nextDouble();
                builder.partition(t, p, random.nextInt(50) == 0 ? 1.5 * capacity : rate, Double.NaN);
            }
            int members = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(100);
            for (int m = 0; m < members; m++) {
                builder.member(builder.consumer("m" + m), random.nextInt(3) == 0 ? capacity * (1 + random.nextInt(3)) / 2
                        : Double.NaN);
            }
            Problem problem = builder.build();
            boolean decreasing = round % 3 > 0;
            int[] order = decreasing ? problem.decreasing : null;
            Bins runs = new Bins(problem, Bins.Rule.WORST);
            runs.placeAll(order, decreasing ? problem.partitions.decreasingRate : problem.rate, n);
            Bins oneByOne = new Bins(problem, Bins.Rule.WORST);
            for (int k = 0; k < n; k++) {
                oneByOne.place(decreasing ? order[k] : k);
            }
            String where = "round " + round;
            assertEquals(oneByOne.count, runs.count, where);
            for (int b = 0; b < runs.count; b++) {
                assertEquals(oneByOne.ids[b], runs.ids[b], where);
                assertEquals(Arrays.toString(oneByOne.heldOf(b)), Arrays.toString(runs.heldOf(b)), where + " bin " + b);
                assertEquals(oneByOne.load[b], runs.load[b], where + " bin " + b);
                assertEquals(oneByOne.foreign[b], runs.foreign[b], where + " bin " + b);
            }
        }
    }
}
