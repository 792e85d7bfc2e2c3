package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

class MemberDataTest {
    private static ByteBuffer utf8(String text) {
        return ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
    }

    @Test
    void roundTripsEveryField() {
        MemberData data = new MemberData("orders-1", 120.5,
                List.of(new TopicPartition("b", 2), new TopicPartition("a", 7), new TopicPartition("a", 1)), 9);
        MemberData back = MemberData.decode(data.encode()).orElseThrow();
        assertEquals("orders-1", back.identity());
        assertEquals(120.5, back.capacity());
        assertEquals(9, back.generation());
        assertEquals(List.of(new TopicPartition("a", 1), new TopicPartition("a", 7), new TopicPartition("b", 2)),
                back.owned());
        String json = StandardCharsets.UTF_8.decode(data.encode()).toString();
        assertTrue(json.startsWith("{\"version\":1,"), json);
    }

    @Test
    void aNewerVersionIsReadForTheFieldsItShares() {
        Optional<MemberData> data = MemberData.decode(utf8(
                "{\"version\":7,\"id\":\"m\",\"capacity\":50,\"generation\":3,\"owned\":{\"t\":[4]},"
                        + "\"rack\":\"r1\",\"weights\":[1,2]}"));
        assertEquals(new MemberData("m", 50.0, List.of(new TopicPartition("t", 4)), 3), data.orElseThrow());
    }

    @Test
    void missingOptionalFieldsHaveDefaults() {
        assertEquals(new MemberData("m", null, List.of(), -1),
                MemberData.decode(utf8("{\"version\":1,\"id\":\"m\"}")).orElseThrow());
        assertEquals(null, MemberData.decode(utf8("{\"version\":1,\"id\":\"m\",\"capacity\":-3}")).orElseThrow()
                .capacity());
    }

    @Test
    void dataThatIsNotOursIsIgnored() {
        for (String other : new String[] {"", "\u0000\u0001binary", "[1,2]", "{\"id\":\"m\"}",
                "{\"version\":0,\"id\":\"m\"}", "{\"version\":\"one\",\"id\":\"m\"}", "{\"version\":1,\"id\":\"\"}",
                "{\"version\":1,\"id\":5}", "{\"version\":1"}) {
            assertEquals(Optional.empty(), MemberData.decode(utf8(other)), other);
        }
        assertEquals(Optional.empty(), MemberData.decode(null));
    }
}
