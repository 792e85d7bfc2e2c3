package io.groupfit.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.File;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Every record in {@link Api} against the schema of the same name in openapi/openapi.json: each field exists with a
 * matching JSON type; a field the schema requires is in the record (for what the clients send: every field the
 * schema requires without a default); a field that may be absent or null is a boxed type.
 */
class OpenApiContractTest {
    private static final File SPEC = new File("../../openapi/openapi.json");
    private static final Set<Class<?>> SENT = Set.of(Api.AssignRequest.class, Api.PartitionRate.class, Api.PartitionRef.class);
    /**
     * Fields the service is adding in the same change as the clients (the broker-side assignor's report: POST
     * /v1/assign with the assignment given). Each must be absent from the contract: once openapi/openapi.json has
     * it, it is checked as every other field and its entry here must go.
     */
    private static final Map<Class<?>, Set<String>> PENDING = Map.of(Api.AssignRequest.class, Set.of("assignment"));
    /** Fields of the contract the clients skip on purpose (GET /v1/groups/{group}'s assignment: only its
     * algorithm and capacity are read). */
    private static final Map<Class<?>, Set<String>> SKIPPED = Map.of(
            Api.AssignResponse.class, Set.of("delta", "outputs", "consumers"), Api.GroupState.class, Set.of("assignment"));

    private static JsonNode schemas() throws Exception {
        assertTrue(SPEC.exists(), "the contract is missing: " + SPEC.getAbsolutePath());
        return GroupfitClient.JSON.readTree(SPEC).path("components").path("schemas");
    }

    private static String jsonName(RecordComponent component) {
        JsonProperty property = component.getAccessor().getAnnotation(JsonProperty.class);
        return property != null ? property.value() : component.getName();
    }

    /** The JSON types a schema allows ("null" included), following anyOf and $ref. */
    private static Set<String> types(JsonNode schema) {
        Set<String> types = new HashSet<>();
        if (schema.has("anyOf")) {
            schema.get("anyOf").forEach(s -> types.addAll(types(s)));
        } else if (schema.has("$ref")) {
            types.add("object");
        } else if (schema.has("type")) {
            types.add(schema.get("type").asText());
        } else {
            types.add("any");
        }
        return types;
    }

    private static String jsonType(Type type) {
        Class<?> raw = type instanceof ParameterizedType p ? (Class<?>) p.getRawType() : (Class<?>) type;
        if (raw == String.class) return "string";
        if (raw == int.class || raw == Integer.class || raw == long.class || raw == Long.class) return "integer";
        if (raw == double.class || raw == Double.class) return "number";
        if (raw == boolean.class || raw == Boolean.class) return "boolean";
        if (List.class.isAssignableFrom(raw)) return "array";
        return "object";
    }

    @Test
    void everyRecordMatchesItsSchema() throws Exception {
        JsonNode schemas = schemas();
        List<String> problems = new ArrayList<>();
        int checked = 0;
        for (Class<?> type : Api.class.getDeclaredClasses()) {
            if (!type.isRecord()) {
                continue;
            }
            JsonNode schema = schemas.path(type.getSimpleName());
            if (schema.isMissingNode()) {
                problems.add(type.getSimpleName() + " is not a schema of the contract");
                continue;
            }
            Set<String> required = new HashSet<>();
            schema.path("required").forEach(r -> required.add(r.asText()));
            Set<String> fields = new HashSet<>();
            for (RecordComponent component : type.getRecordComponents()) {
                String name = jsonName(component);
                fields.add(name);
                JsonNode property = schema.path("properties").path(name);
                boolean pending = PENDING.getOrDefault(type, Set.of()).contains(name);
                if (pending && !property.isMissingNode()) {
                    problems.add(type.getSimpleName() + "." + name + " is in the contract now: remove it from PENDING");
                }
                if (property.isMissingNode()) {
                    if (!pending) {
                        problems.add(type.getSimpleName() + "." + name + " is not in the contract");
                    }
                    continue;
                }
                Set<String> allowed = types(property);
                String mine = jsonType(component.getGenericType());
                if (!allowed.contains(mine) && !allowed.contains("any")
                        && !(mine.equals("number") && allowed.contains("integer"))) {
                    problems.add(type.getSimpleName() + "." + name + " is " + mine + ", the contract says " + allowed);
                }
                boolean mayBeAbsent = !required.contains(name) || allowed.contains("null");
                if (mayBeAbsent && component.getType().isPrimitive() && !SENT.contains(type)) {
                    problems.add(type.getSimpleName() + "." + name + " may be absent or null but is a primitive");
                }
                checked++;
            }
            for (String name : required) {
                boolean hasDefault = schema.path("properties").path(name).has("default");
                if (!fields.contains(name) && (SENT.contains(type) ? !hasDefault : true)
                        && !SKIPPED.getOrDefault(type, Set.of()).contains(name)) {
                    problems.add(type.getSimpleName() + " lacks " + name + ", which the contract requires");
                }
            }
        }
        if (!problems.isEmpty()) {
            fail(String.join("\n", problems));
        }
        assertTrue(checked > 40, "checked only " + checked + " fields");
    }

    @Test
    void whatTheClientsSendIsWhatTheServiceAccepts() throws Exception {
        JsonNode schema = schemas().path("AssignRequest");
        assertEquals(false, schema.path("additionalProperties").asBoolean(true));
        Api.AssignRequest request = new Api.AssignRequest("mwf", 100.0, "g",
                List.of(Api.member("a", null), Api.member("b", 250.0)),
                List.of(new Api.PartitionRate("t", 0, 1.5, null)), Map.of("a", List.of(new Api.PartitionRef("t", 0))),
                null);
        JsonNode sent = GroupfitClient.JSON.valueToTree(request);
        sent.fieldNames().forEachRemaining(name ->
                assertTrue(schema.path("properties").has(name), name + " is not in AssignRequest"));
        assertTrue(!sent.has("params"), "null fields are left out: " + sent);
        assertEquals("{\"topic\":\"t\",\"partition\":0,\"rate\":1.5}", sent.get("partitions").get(0).toString());
        // A member is a bare id or a SizedMember (whose fields everyRecordMatchesItsSchema checks), as the items allow.
        assertEquals("[\"a\",{\"id\":\"b\",\"capacity\":250.0}]", sent.get("members").toString());
        Set<String> items = new HashSet<>();
        for (JsonNode members : schema.path("properties").path("members").path("anyOf")) {
            members.path("items").path("anyOf").forEach(item ->
                    items.add(item.has("$ref") ? item.get("$ref").asText() : item.path("type").asText()));
        }
        assertEquals(Set.of("string", "#/components/schemas/SizedMember"), items);
    }
}
