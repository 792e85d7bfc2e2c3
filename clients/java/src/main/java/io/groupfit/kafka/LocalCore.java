package io.groupfit.kafka;

import io.groupfit.kafka.core.Algorithm;
import io.groupfit.kafka.core.Outcome;
import io.groupfit.kafka.core.Problem;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/** The Java core on a group named as the classic protocol names it (topic-partitions, member identities). */
final class LocalCore {
    private LocalCore() {}

    /**
     * partition → member of the core's answer: {@code members} (identities, in the request's order) each of its
     * own capacity in {@code sizes} or {@code capacity} and its rack in {@code racks} (none: not there); a partition
     * without a rate in {@code rates} has rate 0, and its racks in {@code partitionRacks} (none: not there). With
     * racks on both sides the core computes in its zone mode, as the service would.
     */
    static Map<TopicPartition, String> solve(Algorithm algorithm, double capacity, List<String> members,
            Map<String, Double> sizes, Map<String, String> racks, List<TopicPartition> partitions,
            Map<TopicPartition, Api.PartitionRate> rates, Map<TopicPartition, List<String>> partitionRacks,
            Map<TopicPartition, String> previous) {
        Problem.Builder builder = new Problem.Builder(capacity, partitions.size());
        Map<TopicPartition, Integer> index = new HashMap<>(2 * partitions.size());
        for (TopicPartition tp : partitions) {
            Api.PartitionRate known = rates.get(tp);
            int j = builder.partition(builder.topic(tp.topic()), tp.partition(), known == null ? 0.0 : known.rate(),
                    known == null || known.lag() == null ? Double.NaN : known.lag());
            index.put(tp, j);
            List<String> where = partitionRacks.get(tp);
            if (where != null && !where.isEmpty()) {
                builder.racks(j, where);
            }
        }
        for (String member : members) {
            int c = builder.consumer(member);
            builder.member(c, sizes.getOrDefault(member, Double.NaN));
            if (racks.containsKey(member)) {
                builder.rack(c, racks.get(member));
            }
        }
        previous.forEach((tp, member) -> {
            Integer j = index.get(tp);
            if (j != null) {
                builder.previous(builder.consumer(member), j);
            }
        });
        Outcome outcome = algorithm.solve(builder.build());
        Map<TopicPartition, String> owner = new HashMap<>(2 * partitions.size());
        for (int j = 0; j < partitions.size(); j++) {
            owner.put(partitions.get(j), outcome.owner(j));
        }
        return owner;
    }
}
