package io.groupfit.kafka;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;

/**
 * A group spec as the coordinator builds it, for tests and the benchmark: every member subscribes to `topics`,
 * holds `current`, and has the instance id `instanceId` gives it and the rack (client.rack) `rack` gives it.
 */
record FakeGroupSpec(
        List<String> members,
        Set<Uuid> topics,
        Map<String, Map<Uuid, Set<Integer>>> current,
        Function<String, Optional<String>> instanceId,
        Function<String, Optional<String>> rack) implements GroupSpec {

    /** Members without racks. */
    FakeGroupSpec(List<String> members, Set<Uuid> topics, Map<String, Map<Uuid, Set<Integer>>> current,
            Function<String, Optional<String>> instanceId) {
        this(members, topics, current, instanceId, member -> Optional.empty());
    }

    public Collection<String> memberIds() {
        return members;
    }

    public SubscriptionType subscriptionType() {
        return SubscriptionType.HOMOGENEOUS;
    }

    public boolean isPartitionAssigned(Uuid topicId, int partition) {
        return current.values().stream().anyMatch(held -> held.getOrDefault(topicId, Set.of()).contains(partition));
    }

    public boolean isPartitionAssignable(Uuid topicId, int partition) {
        return true;
    }

    public MemberSubscription memberSubscription(String memberId) {
        return new MemberSubscription() {
            public Optional<String> rackId() {
                return rack.apply(memberId);
            }

            public Optional<String> instanceId() {
                return instanceId.apply(memberId);
            }

            public Set<Uuid> subscribedTopicIds() {
                return new AsCoordinatorHands(topics);
            }
        };
    }

    public MemberAssignment memberAssignment(String memberId) {
        Map<Uuid, Set<Integer>> held = current.getOrDefault(memberId, Map.of());
        return () -> held;
    }

    /**
     * A member's topic ids as the coordinator hands them (its TopicIds): a set that iterates and answers size and
     * contains, and throws on toArray.
     */
    static final class AsCoordinatorHands extends java.util.AbstractSet<Uuid> {
        private final Set<Uuid> topics;

        AsCoordinatorHands(Set<Uuid> topics) {
            this.topics = topics;
        }

        @Override
        public java.util.Iterator<Uuid> iterator() {
            return topics.iterator();
        }

        @Override
        public int size() {
            return topics.size();
        }

        @Override
        public boolean contains(Object o) {
            return topics.contains(o);
        }

        @Override
        public Object[] toArray() {
            throw new UnsupportedOperationException();
        }

        @Override
        public <T> T[] toArray(T[] a) {
            throw new UnsupportedOperationException();
        }
    }

    /** Every topic has `partitions` partitions, without racks. */
    static SubscribedTopicDescriber topics(int partitions) {
        return topics(partitions, p -> Set.of());
    }

    /** Every topic has `partitions` partitions, partition p's replicas in the racks `racks` gives it. */
    static SubscribedTopicDescriber topics(int partitions, java.util.function.IntFunction<Set<String>> racks) {
        return new SubscribedTopicDescriber() {
            public int numPartitions(Uuid topicId) {
                return partitions;
            }

            public Set<String> racksForPartition(Uuid topicId, int partition) {
                return racks.apply(partition);
            }
        };
    }
}
