package io.groupfit.kafka.core;

import java.util.Arrays;

/**
 * A binary min-heap of small integer ids, each at most once, ordered by (value, tie, id): the order Python's heap
 * of tuples (value, tie, id) gives. An id's key can be changed in place (no stale entries to skip).
 */
final class MinHeap {
    private double[] value;
    private long[] tie;
    private int[] position; // -1: not in the heap
    private int[] heap;
    private int size;

    MinHeap(int ids) {
        int capacity = Math.max(ids, 4);
        value = new double[capacity];
        tie = new long[capacity];
        position = new int[capacity];
        Arrays.fill(position, -1);
        heap = new int[capacity];
    }

    int size() {
        return size;
    }

    boolean isEmpty() {
        return size == 0;
    }

    int top() {
        return heap[0];
    }

    double value(int id) {
        return value[id];
    }

    /** Inserts `id` with this key, or moves it to it. */
    void set(int id, double newValue, long newTie) {
        if (id >= position.length) {
            int capacity = Math.max(id + 1, position.length * 2);
            value = Arrays.copyOf(value, capacity);
            tie = Arrays.copyOf(tie, capacity);
            int old = position.length;
            position = Arrays.copyOf(position, capacity);
            Arrays.fill(position, old, capacity, -1);
            heap = Arrays.copyOf(heap, capacity);
        }
        int at = position[id];
        boolean grew = at >= 0 && (newValue > value[id] || (newValue == value[id] && newTie == tie[id]));
        value[id] = newValue;
        tie[id] = newTie;
        if (at < 0) {
            at = size++;
            heap[at] = id;
            position[id] = at;
            up(at);
        } else if (grew) {
            down(at); // a load that grew (the common case): it can only sink
        } else {
            down(up(at));
        }
    }

    int pop() {
        int id = heap[0];
        position[id] = -1;
        size--;
        if (size > 0) {
            heap[0] = heap[size];
            position[heap[0]] = 0;
            down(0);
        }
        return id;
    }

    private boolean less(int a, int b) {
        double x = value[a];
        double y = value[b];
        if (x != y) {
            return x < y;
        }
        return tie[a] != tie[b] ? Long.compareUnsigned(tie[a], tie[b]) < 0 : a < b;
    }

    private int up(int at) {
        int id = heap[at];
        while (at > 0) {
            int parent = (at - 1) >>> 1;
            if (!less(id, heap[parent])) {
                break;
            }
            heap[at] = heap[parent];
            position[heap[at]] = at;
            at = parent;
        }
        heap[at] = id;
        position[id] = at;
        return at;
    }

    private void down(int at) {
        int id = heap[at];
        while (true) {
            int child = 2 * at + 1;
            if (child >= size) {
                break;
            }
            if (child + 1 < size && less(heap[child + 1], heap[child])) {
                child++;
            }
            if (!less(heap[child], id)) {
                break;
            }
            heap[at] = heap[child];
            position[heap[at]] = at;
            at = child;
        }
        heap[at] = id;
        position[id] = at;
    }
}
