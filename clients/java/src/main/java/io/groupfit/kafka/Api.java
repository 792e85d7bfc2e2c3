package io.groupfit.kafka;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;
import java.util.Map;

/**
 * The bodies of groupfit's API that the assignors send and read, named as in openapi/openapi.json's components.
 * OpenApiContractTest checks every record against the schema of its name, field by field: a component is required
 * (a primitive, or {@code @JsonProperty(required = true)}) exactly where the contract requires the property and
 * never allows null; the properties a record leaves out on purpose are named in its {@code @JsonIgnoreProperties}.
 * Answers ignore fields they do not know, so a newer service does not break an older client.
 */
public final class Api {
    private Api() {}

    public record PartitionRef(@JsonProperty(required = true) String topic, int partition) {}

    /**
     * A partition's rate and lag, and (zone-aware requests) the racks a consumer reads it from without crossing zones:
     * its leader's, or every replica's where the brokers serve fetch-from-follower (null: none known, left out).
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    @JsonIgnoreProperties(ignoreUnknown = true)
    public record PartitionRate(
            @JsonProperty(required = true) String topic, int partition, double rate, Double lag, List<String> racks) {
        /** A partition without racks. */
        public PartitionRate(String topic, int partition, double rate, Double lag) {
            this(topic, partition, rate, lag, null);
        }
    }

    /**
     * A partition of an assignment request: a PartitionRate whose rate may be left out (null) for the group's stored
     * one, with its stored lag unless {@code lag} is given.
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record RequestPartition(
            @JsonProperty(required = true) String topic, int partition, Double rate, Double lag, List<String> racks) {}

    /**
     * A member of its own capacity or rack (its client.rack: zone-aware requests), in AssignRequest.members; a member
     * sent as a bare id has the request's capacity and no rack.
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record SizedMember(@JsonProperty(required = true) String id, Double capacity, String rack) {}

    /**
     * An item of AssignRequest.members: the bare id of a member without a capacity or rack of its own, else {id,
     * capacity?, rack?}.
     */
    public static Object member(String id, Double capacity, String rack) {
        return capacity == null && rack == null ? id : new SizedMember(id, capacity, rack);
    }

    /**
     * POST /v1/assign. Only what the assignors send; null fields are left out (the service's defaults). Each of
     * {@code members} is a String or a {@link SizedMember} ({@link #member}), as the contract's anyOf allows. With
     * {@code assignment} the request reports an assignment computed elsewhere (the broker-side assignor's): the
     * service checks it places every partition once, on members, and stores it as the group's next version. With
     * {@code dryRun} the answer is computed and not stored.
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    // previous_racks is for requests without members: the assignors always send theirs, each with its rack.
    @JsonIgnoreProperties({"consumer_throughput", "expected_version", "iteration_s", "previous_racks", "rebalance_s"})
    public record AssignRequest(
            @JsonProperty(required = true) String algorithm,
            Double capacity,
            String group,
            List<Object> members,
            List<RequestPartition> partitions,
            Map<String, List<PartitionRef>> previous,
            Map<String, Object> params,
            Map<String, List<PartitionRef>> assignment,
            @JsonProperty("dry_run") Boolean dryRun) {
        /** A request for the service to compute. */
        public AssignRequest(String algorithm, Double capacity, String group, List<Object> members,
                List<RequestPartition> partitions, Map<String, List<PartitionRef>> previous, Map<String, Object> params) {
            this(algorithm, capacity, group, members, partitions, previous, params, null, null);
        }

        /** A request that reports {@code assignment}, computed elsewhere. */
        public AssignRequest(String algorithm, Double capacity, String group, List<Object> members,
                List<RequestPartition> partitions, Map<String, List<PartitionRef>> previous, Map<String, Object> params,
                Map<String, List<PartitionRef>> assignment) {
            this(algorithm, capacity, group, members, partitions, previous, params, assignment, null);
        }

        /** The same request, answered without being stored. */
        public AssignRequest asDryRun() {
            return new AssignRequest(algorithm, capacity, group, members, partitions, previous, params, assignment, true);
        }

        /** The same request reporting {@code given}, computed by {@code by} with {@code byParams} (empty: none). */
        public AssignRequest reporting(String by, Map<String, Object> byParams, Map<String, List<PartitionRef>> given) {
            return new AssignRequest(by, capacity, group, members, partitions, previous,
                    byParams.isEmpty() ? null : byParams, given, null);
        }
    }

    /** A consumer's load; zone-aware answers add its rack (null: not known) and the rate it reads across zones. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ConsumerLoad(
            @JsonProperty(required = true) String id,
            double load,
            double utilization,
            @JsonProperty("partition_count") int partitionCount,
            String rack,
            @JsonProperty("cross_zone_rate") Double crossZoneRate) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record Move(
            @JsonProperty(required = true) String topic,
            int partition,
            @JsonProperty(required = true) String from,
            @JsonProperty(required = true) String to,
            double rate) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record OverloadedPartition(
            @JsonProperty(required = true) String topic,
            int partition,
            double rate,
            @JsonProperty(required = true) String consumer) {}

    /**
     * The answer of POST /v1/assign, without the delta and the algorithm's outputs, which the assignors do not use;
     * {@code crossZoneRate}: zone-aware answers' rate read across zones, all consumers (null: a rack-free answer).
     */
    @JsonIgnoreProperties(value = {"delta", "outputs"}, ignoreUnknown = true)
    public record AssignResponse(
            @JsonProperty(required = true) String algorithm,
            double capacity,
            @JsonProperty(required = true) Map<String, List<PartitionRef>> assignment,
            @JsonProperty(required = true) List<ConsumerLoad> consumers,
            @JsonProperty(required = true) List<Move> moves,
            double rscore,
            @JsonProperty("consumer_count") int consumerCount,
            @JsonProperty("lower_bound") int lowerBound,
            @JsonProperty(value = "overloaded_partitions", required = true) List<OverloadedPartition> overloadedPartitions,
            @JsonProperty(value = "overloaded_members", required = true) List<String> overloadedMembers,
            @JsonProperty("recommended_consumers") Integer recommendedConsumers,
            String group,
            Long version,
            @JsonProperty("cross_zone_rate") Double crossZoneRate) {}

    /**
     * GET /v1/groups/{group}: what the broker-side assignor reads of it (the stored assignment, the consumers'
     * racks and their loads are left out).
     */
    @JsonIgnoreProperties(value = {"assignment", "racks", "loads"}, ignoreUnknown = true)
    public record GroupState(
            @JsonProperty(required = true) String group,
            long version,
            @JsonProperty(required = true) String algorithm,
            double capacity,
            @JsonProperty(value = "updated_at", required = true) String updatedAt) {}

    /** GET /v1/groups/{group}/rates. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public record StoredRates(
            @JsonProperty(required = true) String group,
            @JsonProperty(required = true) List<PartitionRate> partitions,
            @JsonProperty(value = "window_end", required = true) String windowEnd,
            @JsonProperty(value = "updated_at", required = true) String updatedAt) {}

    /** An error's code and sentence, without its details, which the assignors do not use. */
    @JsonIgnoreProperties(value = {"details"}, ignoreUnknown = true)
    public record ErrorDetail(@JsonProperty(required = true) String code, @JsonProperty(required = true) String message) {}

    /** GET /v1/groups/{group}/scale: up, down, reass (the same members, reassigned) or none, and why. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ScaleSignal(
            @JsonProperty(required = true) String group,
            @JsonProperty(required = true) String algorithm,
            double capacity,
            int needed,
            int current,
            @JsonProperty("lower_bound") int lowerBound,
            @JsonProperty("total_rate") double totalRate,
            @JsonProperty(required = true) List<String> overloaded,
            @JsonProperty(required = true) String action,
            @JsonProperty(required = true) String reason,
            @JsonProperty(value = "rates_window_end", required = true) String ratesWindowEnd,
            int unowned,
            @JsonProperty(required = true) List<String> remove,
            Double rscore,
            Integer moves,
            Double gain) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ErrorResponse(@JsonProperty(required = true) ErrorDetail error) {}
}
