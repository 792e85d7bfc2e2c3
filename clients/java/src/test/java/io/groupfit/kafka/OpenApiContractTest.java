package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every record of {@link Api} against the schema of the same name in openapi/openapi.json, field by field: its
 * components and the properties it leaves out on purpose (its {@code @JsonIgnoreProperties}) are exactly the
 * schema's properties; each component's type is the property's (String a string, int or long an integer, double a
 * number, boolean a boolean, a List an array of its item type, a Map an object of its value type, a record a $ref
 * to the schema of its name, Object one of several types); a component is required (a primitive, or
 * {@code @JsonProperty(required = true)}) exactly where the schema requires the property and never allows null.
 * Each drift test changes a copy of the contract as a service change would and shows that the check names it.
 */
class OpenApiContractTest {
    private static final File SPEC = new File("../../openapi/openapi.json");

    private static ObjectNode schemas() throws Exception {
        assertTrue(SPEC.exists(), "the contract is missing: " + SPEC.getAbsolutePath());
        return (ObjectNode) GroupfitClient.JSON.readTree(SPEC).path("components").path("schemas");
    }

    private static String jsonName(RecordComponent component) {
        JsonProperty property = component.getAccessor().getAnnotation(JsonProperty.class);
        return property != null && !property.value().isEmpty() ? property.value() : component.getName();
    }

    private static boolean required(RecordComponent component) {
        JsonProperty property = component.getAccessor().getAnnotation(JsonProperty.class);
        return component.getType().isPrimitive() || (property != null && property.required());
    }

    private static Set<String> leftOut(Class<?> record) {
        JsonIgnoreProperties ignored = record.getAnnotation(JsonIgnoreProperties.class);
        return ignored == null ? Set.of() : Set.of(ignored.value());
    }

    /** A property's schema without its null alternative (anyOf [X, null] → X), or the schema itself. */
    private static JsonNode withoutNull(JsonNode property) {
        List<JsonNode> kept = new ArrayList<>();
        property.path("anyOf").forEach(alternative -> {
            if (!"null".equals(alternative.path("type").asText())) {
                kept.add(alternative);
            }
        });
        return kept.size() == 1 && property.path("anyOf").size() == 2 ? kept.get(0) : property;
    }

    private static String scalar(Class<?> type) {
        if (type == String.class) return "string";
        if (type == int.class || type == Integer.class || type == long.class || type == Long.class) return "integer";
        if (type == double.class || type == Double.class) return "number";
        if (type == boolean.class || type == Boolean.class) return "boolean";
        return null;
    }

    private static Class<?> rawClass(Type type) {
        return type instanceof ParameterizedType p ? (Class<?>) p.getRawType() : (Class<?>) type;
    }

    /** Every difference between the records of {@link Api} and {@code schemas}. */
    static List<String> check(JsonNode schemas) {
        List<String> problems = new ArrayList<>();
        for (Class<?> type : Api.class.getDeclaredClasses()) {
            if (type.isRecord()) {
                checkRecord(schemas, type, problems);
            }
        }
        return problems;
    }

    private static void checkRecord(JsonNode schemas, Class<?> type, List<String> problems) {
        String name = type.getSimpleName();
        JsonNode schema = schemas.path(name);
        if (schema.isMissingNode()) {
            problems.add(name + " is not a schema of the contract");
            return;
        }
        JsonNode properties = schema.path("properties");
        Set<String> required = new HashSet<>();
        schema.path("required").forEach(r -> required.add(r.asText()));
        Set<String> mine = new TreeSet<>(leftOut(type));
        for (String left : leftOut(type)) {
            if (!properties.has(left)) {
                problems.add(name + " leaves out '" + left + "', which the contract does not have");
            }
        }
        for (RecordComponent component : type.getRecordComponents()) {
            String json = jsonName(component);
            String where = name + "." + component.getName();
            mine.add(json);
            JsonNode property = properties.path(json);
            if (property.isMissingNode()) {
                problems.add(where + " reads '" + json + "', which " + name + " does not have");
                continue;
            }
            JsonNode inner = withoutNull(property);
            boolean mayBeMissing = !required.contains(json) || inner != property;
            if (required(component) && mayBeMissing) {
                problems.add(where + " is required, but " + name + "." + json + " may be absent or null");
            } else if (!required(component) && !mayBeMissing) {
                problems.add(where + " is optional, but " + name + "." + json + " is required and never null");
            }
            value(component.getGenericType(), inner, where, problems);
        }
        properties.fieldNames().forEachRemaining(property -> {
            if (!mine.contains(property)) {
                problems.add(name + "." + property + " is in the contract, neither in Api." + name + " nor left out");
            }
        });
    }

    /** A value of Java type {@code type} against its schema {@code node} (null aside). */
    private static void value(Type type, JsonNode node, String where, List<String> problems) {
        Class<?> raw = rawClass(type);
        if (node.has("$ref")) {
            String ref = node.get("$ref").asText().replaceAll(".*/", "");
            if (!raw.isRecord() || !raw.getSimpleName().equals(ref)) {
                problems.add(where + " is " + raw.getSimpleName() + ", the contract says " + ref);
            }
            return; // the record is checked against its own schema
        }
        String kind = node.path("type").asText("");
        if (raw == Object.class) {
            if (!kind.isEmpty() && !node.has("anyOf")) {
                problems.add(where + " is any value, the contract says " + kind);
            }
        } else if (scalar(raw) != null) {
            if (!scalar(raw).equals(kind)) {
                problems.add(where + " is " + scalar(raw) + " (" + raw.getSimpleName() + "), the contract says " + node);
            }
        } else if (List.class.isAssignableFrom(raw)) {
            if (!kind.equals("array")) {
                problems.add(where + " is an array, the contract says " + node);
            } else {
                value(((ParameterizedType) type).getActualTypeArguments()[0], node.path("items"), where + "[]", problems);
            }
        } else if (Map.class.isAssignableFrom(raw)) {
            Type values = ((ParameterizedType) type).getActualTypeArguments()[1];
            if (!kind.equals("object") || node.has("properties")) {
                problems.add(where + " is a map, the contract says " + node);
            } else if (values != Object.class) {
                value(values, node.path("additionalProperties"), where + "{}", problems);
            }
        } else {
            problems.add(where + " is " + raw.getSimpleName() + ", the contract says " + node);
        }
    }

    @Test
    void everyRecordMatchesItsSchema() throws Exception {
        List<String> problems = check(schemas());
        assertEquals(List.of(), problems, String.join("\n", problems));
        long records = Stream.of(Api.class.getDeclaredClasses()).filter(Class::isRecord).count();
        long fields = Stream.of(Api.class.getDeclaredClasses()).filter(Class::isRecord)
                .mapToLong(r -> r.getRecordComponents().length).sum();
        assertTrue(records >= 11 && fields > 45, records + " records, " + fields + " fields");
    }

    private static ObjectNode schema(ObjectNode schemas, String name) {
        return (ObjectNode) schemas.get(name);
    }

    private static ObjectNode property(ObjectNode schemas, String name, String property) {
        return (ObjectNode) schemas.get(name).get("properties").get(property);
    }

    private static void removeRequired(ObjectNode schemas, String name, String property) {
        ArrayNode required = (ArrayNode) schemas.get(name).get("required");
        for (int i = 0; i < required.size(); i++) {
            if (required.get(i).asText().equals(property)) {
                required.remove(i);
                return;
            }
        }
    }

    static Stream<Arguments> drifts() {
        Map<String, Consumer<ObjectNode>> changes = Map.of(
                "ConsumerLoad.lag is in the contract, neither in Api.ConsumerLoad nor left out",
                s -> ((ObjectNode) schema(s, "ConsumerLoad").get("properties")).putObject("lag").put("type", "number"),
                "Move.from reads 'from', which Move does not have",
                s -> ((ObjectNode) schema(s, "Move").get("properties")).set("source",
                        ((ObjectNode) schema(s, "Move").get("properties")).remove("from")),
                "ConsumerLoad.partitionCount is integer (int), the contract says",
                s -> property(s, "ConsumerLoad", "partition_count").put("type", "number"),
                "AssignResponse.version is optional, but AssignResponse.version is required and never null",
                s -> {
                    ((ObjectNode) schema(s, "AssignResponse").get("properties")).putObject("version").put("type", "integer");
                    ((ArrayNode) schema(s, "AssignResponse").get("required")).add("version");
                },
                "ConsumerLoad.load is required, but ConsumerLoad.load may be absent or null",
                s -> removeRequired(s, "ConsumerLoad", "load"),
                "StoredRates.group is required, but StoredRates.group may be absent or null",
                s -> removeRequired(s, "StoredRates", "group"),
                "AssignResponse.moves[] is Move, the contract says ReplicaMove",
                s -> ((ObjectNode) property(s, "AssignResponse", "moves").get("items"))
                        .put("$ref", "#/components/schemas/ReplicaMove"),
                "AssignResponse.overloadedMembers[] is string (String), the contract says",
                s -> ((ObjectNode) property(s, "AssignResponse", "overloaded_members").get("items")).put("type", "integer"),
                "AssignResponse leaves out 'delta', which the contract does not have",
                s -> ((ObjectNode) schema(s, "AssignResponse").get("properties")).remove("delta"),
                "PartitionRate.lag is number (Double), the contract says",
                s -> ((ObjectNode) property(s, "PartitionRate", "lag").get("anyOf").get(0)).put("type", "string"));
        Map<String, Consumer<ObjectNode>> zones = Map.of(
                "PartitionRate.racks[] is string (String), the contract says",
                s -> ((ObjectNode) property(s, "PartitionRate", "racks").get("items")).put("type", "integer"),
                "ConsumerLoad.crossZoneRate is optional, but ConsumerLoad.cross_zone_rate is required and never null",
                s -> ((ArrayNode) schema(s, "ConsumerLoad").get("required")).add("cross_zone_rate"));
        return Stream.concat(changes.entrySet().stream(), zones.entrySet().stream())
                .map(e -> Arguments.of(e.getKey(), e.getValue()));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("drifts")
    void eachDriftIsNamed(String expected, Consumer<ObjectNode> change) throws Exception {
        ObjectNode schemas = schemas().deepCopy();
        change.accept(schemas);
        List<String> problems = check(schemas);
        assertTrue(problems.stream().anyMatch(p -> p.contains(expected)), expected + " not in " + problems);
    }

    @Test
    void aRequiredPropertyMissingFromAnAnswerIsRefused() {
        String withoutMoves = "{\"algorithm\":\"mwf\",\"capacity\":1,\"assignment\":{},\"consumers\":[],\"rscore\":0,"
                + "\"consumer_count\":0,\"lower_bound\":0,\"overloaded_partitions\":[],\"overloaded_members\":[],"
                + "\"recommended_consumers\":null}";
        Exception refused = assertThrows(Exception.class,
                () -> GroupfitClient.JSON.readValue(withoutMoves, Api.AssignResponse.class));
        assertTrue(refused.getMessage().contains("moves"), refused.getMessage());
    }

    @Test
    void whatTheClientsSendIsWhatTheServiceAccepts() throws Exception {
        JsonNode schema = schemas().path("AssignRequest");
        assertEquals(false, schema.path("additionalProperties").asBoolean(true));
        Api.AssignRequest request = new Api.AssignRequest("mwf", 100.0, "g",
                List.of(Api.member("a", null, null), Api.member("b", 250.0, null), Api.member("c", null, "eu-1a")),
                List.of(new Api.RequestPartition("t", 0, 1.5, null, null),
                        new Api.RequestPartition("t", 1, 2.0, 3.0, List.of("eu-1a")),
                        new Api.RequestPartition("t", 2, null, null, null)),
                Map.of("a", List.of(new Api.PartitionRef("t", 0))), null);
        JsonNode sent = GroupfitClient.JSON.valueToTree(request);
        sent.fieldNames().forEachRemaining(name ->
                assertTrue(schema.path("properties").has(name), name + " is not in AssignRequest"));
        assertTrue(!sent.has("params"), "null fields are left out: " + sent);
        assertEquals("{\"topic\":\"t\",\"partition\":0,\"rate\":1.5}", sent.get("partitions").get(0).toString());
        assertEquals("{\"topic\":\"t\",\"partition\":1,\"rate\":2.0,\"lag\":3.0,\"racks\":[\"eu-1a\"]}",
                sent.get("partitions").get(1).toString());
        assertEquals("{\"topic\":\"t\",\"partition\":2}", sent.get("partitions").get(2).toString()); // the stored rate
        // A member is a bare id or a SizedMember (whose fields everyRecordMatchesItsSchema checks), as the items allow.
        assertEquals("[\"a\",{\"id\":\"b\",\"capacity\":250.0},{\"id\":\"c\",\"rack\":\"eu-1a\"}]",
                sent.get("members").toString());
        Set<String> items = new HashSet<>();
        for (JsonNode members : schema.path("properties").path("members").path("anyOf")) {
            members.path("items").path("anyOf").forEach(item ->
                    items.add(item.has("$ref") ? item.get("$ref").asText() : item.path("type").asText()));
        }
        assertEquals(Set.of("string", "#/components/schemas/SizedMember"), items);
    }
}
