package io.groupfit.kafka.core;

import java.util.Arrays;

/**
 * A binary min-heap of small integer ids, each at most once, ordered by (value, tie, id): the order Python's heap
 * of tuples (value, tie, id) gives. An id's key can be changed in place (no stale entries to skip).
 */
final class MinHeap {
    private double[] value; // by id
    private int[] position; // by id; -1: not in the heap
    // by place in the heap: the id and its key (kept beside it, so a sift compares neighbours in memory)
    private int[] heap;
    private double[] keyValue;
    private long[] keyTie;
    private int size;

    MinHeap(int ids) {
        int capacity = Math.max(ids, 4);
        value = new double[capacity];
        position = new int[capacity];
        Arrays.fill(position, -1);
        heap = new int[capacity];
        keyValue = new double[capacity];
        keyTie = new long[capacity];
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
            int old = position.length;
            position = Arrays.copyOf(position, capacity);
            Arrays.fill(position, old, capacity, -1);
            heap = Arrays.copyOf(heap, capacity);
            keyValue = Arrays.copyOf(keyValue, capacity);
            keyTie = Arrays.copyOf(keyTie, capacity);
        }
        int at = position[id];
        boolean grew = at >= 0 && (newValue > value[id] || (newValue == value[id] && newTie == keyTie[at]));
        value[id] = newValue;
        if (at < 0) {
            up(size++, id, newValue, newTie);
        } else if (grew) {
            down(at, id, newValue, newTie); // a load that grew (the common case): it can only sink
        } else {
            at = up(at, id, newValue, newTie);
            down(at, id, newValue, newTie);
        }
    }

    /** The place of the entry that is the top once the top is left out (the lesser of its children), -1: none. */
    int secondPlace() {
        if (size < 2) {
            return -1;
        }
        return size > 2 && before(2, keyValue[1], keyTie[1], heap[1]) ? 2 : 1;
    }

    int pop() {
        int id = heap[0];
        position[id] = -1;
        size--;
        if (size > 0) {
            down(0, heap[size], keyValue[size], keyTie[size]);
        }
        return id;
    }

    /** Whether the entry at place {@code at} sorts before (v, t, id) (at the second place: whether the top, with the
     * key (v, t, id), would sink below it). */
    boolean before(int at, double v, long t, int id) {
        double x = keyValue[at];
        if (x != v) {
            return x < v;
        }
        return keyTie[at] != t ? Long.compareUnsigned(keyTie[at], t) < 0 : heap[at] < id;
    }

    private void put(int at, int id, double v, long t) {
        heap[at] = id;
        keyValue[at] = v;
        keyTie[at] = t;
        position[id] = at;
    }

    private void move(int from, int to) {
        put(to, heap[from], keyValue[from], keyTie[from]);
    }

    /** (v, t, id) from place {@code at} up to its place; that place. */
    private int up(int at, int id, double v, long t) {
        while (at > 0) {
            int parent = (at - 1) >>> 1;
            if (!(v < keyValue[parent] || (v == keyValue[parent] && !before(parent, v, t, id)))) {
                break;
            }
            move(parent, at);
            at = parent;
        }
        put(at, id, v, t);
        return at;
    }

    /** (v, t, id) from place {@code at} down to its place. */
    private void down(int at, int id, double v, long t) {
        while (true) {
            int child = 2 * at + 1;
            if (child >= size) {
                break;
            }
            if (child + 1 < size && before(child + 1, keyValue[child], keyTie[child], heap[child])) {
                child++;
            }
            if (!before(child, v, t, id)) {
                break;
            }
            move(child, at);
            at = child;
        }
        put(at, id, v, t);
    }
}
