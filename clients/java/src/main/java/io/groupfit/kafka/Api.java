package io.groupfit.kafka;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import java.util.List;
import java.util.Map;

/**
 * The bodies of groupfit's API that the assignors send and read, named as in openapi/openapi.json's
 * components (OpenApiContractTest checks every field against the contract). Answers ignore fields they do not
 * know, so a newer service does not break an older client.
 */
public final class Api {
    private Api() {}

    public record PartitionRef(String topic, int partition) {}

    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record PartitionRate(String topic, int partition, double rate, Double lag) {}

    /** A member of its own capacity, in AssignRequest.members; a member sent as a bare id has the request's. */
    public record SizedMember(String id, double capacity) {}

    /** An item of AssignRequest.members: the bare id of a member without a capacity of its own, else {id, capacity}. */
    public static Object member(String id, Double capacity) {
        return capacity == null ? id : new SizedMember(id, capacity);
    }

    /**
     * POST /v1/assign. Only what the assignors send; null fields are left out (the service's defaults). Each of
     * {@code members} is a String or a {@link SizedMember} ({@link #member}), as the contract's anyOf allows.
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record AssignRequest(
            String algorithm,
            Double capacity,
            String group,
            List<Object> members,
            List<PartitionRate> partitions,
            Map<String, List<PartitionRef>> previous,
            Map<String, Object> params) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ConsumerLoad(
            String id, double load, double utilization, @JsonProperty("partition_count") int partitionCount) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record Move(String topic, int partition, String from, String to, double rate) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record OverloadedPartition(String topic, int partition, double rate, String consumer) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record AssignResponse(
            String algorithm,
            double capacity,
            Map<String, List<PartitionRef>> assignment,
            List<ConsumerLoad> consumers,
            List<Move> moves,
            double rscore,
            @JsonProperty("consumer_count") int consumerCount,
            @JsonProperty("lower_bound") int lowerBound,
            @JsonProperty("overloaded_partitions") List<OverloadedPartition> overloadedPartitions,
            @JsonProperty("overloaded_members") List<String> overloadedMembers,
            @JsonProperty("recommended_consumers") Integer recommendedConsumers,
            String group,
            Long version) {}

    /** GET /v1/groups/{group}/rates. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public record StoredRates(
            String group,
            List<PartitionRate> partitions,
            @JsonProperty("window_end") String windowEnd,
            @JsonProperty("updated_at") String updatedAt) {}

    /** GET /v1/groups/{group}/scale: up, down, reass (the same members, reassigned) or none, and why. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ScaleSignal(
            String group,
            String algorithm,
            double capacity,
            int needed,
            int current,
            @JsonProperty("lower_bound") int lowerBound,
            @JsonProperty("total_rate") double totalRate,
            List<String> overloaded,
            String action,
            String reason,
            @JsonProperty("rates_window_end") String ratesWindowEnd,
            int unowned,
            List<String> remove,
            Double rscore,
            Integer moves,
            Double gain) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ErrorDetail(String code, String message) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    public record ErrorResponse(ErrorDetail error) {}
}
