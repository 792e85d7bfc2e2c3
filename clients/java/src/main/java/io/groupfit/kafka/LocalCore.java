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
     * own capacity in {@code sizes} or {@code capacity}; a partition without a rate in {@code rates} has rate 0.
     */
    static Map<TopicPartition, String> solve(Algorithm algorithm, double capacity, List<String> members,
            Map<String, Double> sizes, List<TopicPartition> partitions, Map<TopicPartition, Api.PartitionRate> rates,
            Map<TopicPartition, String> previous) {
        Problem.Builder builder = new Problem.Builder(capacity, partitions.size());
        Map<TopicPartition, Integer> index = new HashMap<>(2 * partitions.size());
        for (TopicPartition tp : partitions) {
            Api.PartitionRate known = rates.get(tp);
            index.put(tp, builder.partition(builder.topic(tp.topic()), tp.partition(), known == null ? 0.0 : known.rate(),
                    known == null || known.lag() == null ? Double.NaN : known.lag()));
        }
        for (String member : members) {
            builder.member(builder.consumer(member), sizes.getOrDefault(member, Double.NaN));
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
