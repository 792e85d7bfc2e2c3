package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BalanceTest {
    private static Map<String, Integer> counts(Map<Integer, String> owner) {
        Map<String, Integer> counts = new HashMap<>();
        owner.values().forEach(m -> counts.merge(m, 1, Integer::sum));
        return counts;
    }

    @Test
    void countsDifferByAtMostOneAndEveryPartitionIsPlacedOnce() {
        List<Integer> partitions = new ArrayList<>();
        for (int p = 0; p < 11; p++) {
            partitions.add(p);
        }
        Map<Integer, String> owner = Balance.sticky(List.of("a", "b", "c"), partitions, Map.of());
        assertEquals(11, owner.size());
        assertEquals(Map.of("a", 4, "b", 4, "c", 3), counts(owner));
        // The extra partitions stay with the members that held most.
        Map<Integer, String> held = Balance.sticky(List.of("a", "b", "c"), List.of(0, 1, 2, 3),
                Map.of(0, "c", 1, "c", 2, "c"));
        assertEquals(Map.of("c", 2, "a", 1, "b", 1), counts(held));
    }

    @Test
    void keepsLastOwnersWithinTheirShareAndMovesOnlyTheSurplus() {
        Map<Integer, String> last = new HashMap<>();
        for (int p = 0; p < 6; p++) {
            last.put(p, p < 4 ? "a" : "b");
        }
        last.put(7, "gone");
        Map<Integer, String> owner = Balance.sticky(List.of("a", "b", "c"), List.of(0, 1, 2, 3, 4, 5, 6, 7, 8), last);
        assertEquals(Map.of("a", 3, "b", 3, "c", 3), counts(owner));
        assertEquals(List.of("a", "a", "a", "c", "b", "b"),
                List.of(owner.get(0), owner.get(1), owner.get(2), owner.get(3), owner.get(4), owner.get(5)));
    }

    @Test
    void noMembersNoAssignment() {
        assertEquals(Map.of(), Balance.sticky(List.of(), List.of(1, 2), Map.of()));
    }
}
