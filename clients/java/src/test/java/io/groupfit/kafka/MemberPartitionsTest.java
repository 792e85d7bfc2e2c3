package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.Uuid;
import org.junit.jupiter.api.Test;

/** A member's answered assignment on arrays reads as the map of sets the coordinator builds from its records. */
class MemberPartitionsTest {
    private static final Uuid[] TOPICS = {new Uuid(1, 1), new Uuid(1, 2), new Uuid(1, 3)};
    private static final Map<Uuid, Integer> TOPIC_OF = Map.of(TOPICS[0], 0, TOPICS[1], 1, TOPICS[2], 2);

    @Test
    void readsAsTheMapOfItsRuns() {
        // topic 0: 1, 4; topic 2: 0, 2, 9 (topic 1: none)
        MemberPartitions mine = new MemberPartitions(TOPICS, TOPIC_OF, new int[] {1, 4, 0, 2, 9}, new int[] {0, 2, 0},
                new int[] {2, 5, 0}, 2);
        Map<Uuid, Set<Integer>> expected = new HashMap<>();
        expected.put(TOPICS[0], Set.of(1, 4));
        expected.put(TOPICS[2], Set.of(0, 2, 9));
        assertEquals(expected, mine);
        assertEquals(mine, expected);
        assertEquals(expected.hashCode(), mine.hashCode());
        assertEquals(2, mine.size());
        assertEquals(Set.of(0, 2, 9), mine.get(TOPICS[2]));
        assertNull(mine.get(TOPICS[1]));
        assertNull(mine.get(new Uuid(9, 9)));
        assertNull(mine.get("not a topic id"));
        assertTrue(mine.containsKey(TOPICS[0]));
        assertFalse(mine.containsKey(TOPICS[1]));
        assertEquals(expected.entrySet(), mine.entrySet());
        assertThrows(UnsupportedOperationException.class, () -> mine.put(TOPICS[1], Set.of(3)));
    }

    @Test
    void anEmptyAssignmentIsTheEmptyMap() {
        MemberPartitions none = new MemberPartitions(TOPICS, TOPIC_OF, new int[0], new int[0], new int[0], 0);
        assertEquals(Map.of(), none);
        assertTrue(none.isEmpty());
        assertFalse(none.entrySet().iterator().hasNext());
    }
}
