package io.groupfit.kafka;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/** A stand-in for groupfit in unit tests: canned rates, assign and scale handlers, an optional delay. */
final class FakeService implements AutoCloseable {
    record Reply(int status, String body) {}

    final HttpServer server;
    final List<JsonNode> assignRequests = new CopyOnWriteArrayList<>();
    volatile String rates = "{\"error\":{\"code\":\"group_not_found\",\"message\":\"no such group\"}}";
    volatile int ratesStatus = 404;
    volatile long delayMs = 0;
    /** While closed, every request waits here (a service that hangs); opened when the test ends. */
    volatile java.util.concurrent.CountDownLatch gate = new java.util.concurrent.CountDownLatch(0);
    volatile String group = "{\"error\":{\"code\":\"group_not_found\",\"message\":\"no such group\"}}";
    volatile int groupStatus = 404;
    final java.util.concurrent.atomic.AtomicInteger ratesReads = new java.util.concurrent.atomic.AtomicInteger();
    volatile Function<JsonNode, Reply> assign = request -> new Reply(500, "{}");
    final List<String> scaleQueries = new CopyOnWriteArrayList<>();
    volatile Function<String, Reply> scale = query -> new Reply(500, "{}");

    FakeService() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            try {
                gate.await();
                Thread.sleep(delayMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Reply reply;
            if (exchange.getRequestMethod().equals("GET") && exchange.getRequestURI().getPath().endsWith("/rates")) {
                ratesReads.incrementAndGet();
                reply = new Reply(ratesStatus, rates);
            } else if (exchange.getRequestMethod().equals("GET") && exchange.getRequestURI().getPath().endsWith("/scale")) {
                String query = exchange.getRequestURI().getRawQuery();
                scaleQueries.add(query == null ? "" : query);
                reply = scale.apply(query == null ? "" : query);
            } else if (exchange.getRequestMethod().equals("GET")) {
                reply = new Reply(groupStatus, group);
            } else {
                JsonNode request = GroupfitClient.JSON.readTree(exchange.getRequestBody());
                if (request.has("group")) { // a stateless request is the broker assignor's warm-up
                    assignRequests.add(request);
                }
                reply = assign.apply(request);
            }
            byte[] body = reply.body().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().add("content-type", "application/json");
            exchange.sendResponseHeaders(reply.status(), body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        // Handlers on threads of their own: a hung request (the gate) does not stop the server from stopping.
        server.setExecutor(java.util.concurrent.Executors.newCachedThreadPool(runnable -> {
            Thread thread = new Thread(runnable, "fake-service");
            thread.setDaemon(true);
            return thread;
        }));
        server.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Rates for partitions 0..n-1 of `topic`: rates[p]. */
    void ratesFor(String topic, double... rates) {
        StringBuilder partitions = new StringBuilder();
        for (int p = 0; p < rates.length; p++) {
            partitions.append(p == 0 ? "" : ",").append("{\"topic\":\"").append(topic).append("\",\"partition\":")
                    .append(p).append(",\"rate\":").append(rates[p]).append("}");
        }
        this.rates = "{\"group\":\"g\",\"partitions\":[" + partitions + "],\"window_end\":\"x\",\"updated_at\":\"x\"}";
        ratesStatus = 200;
    }

    /** GET /v1/groups/{group} answers this algorithm and capacity. */
    void stored(String algorithm, double capacity) {
        group = "{\"group\":\"g1\",\"version\":3,\"algorithm\":\"" + algorithm + "\",\"capacity\":" + capacity
                + ",\"assignment\":{},\"updated_at\":\"x\"}";
        groupStatus = 200;
    }

    /** Rates for partitions 0..n-1 of `topic`, all `rate`. */
    void ratesFor(String topic, int n, double rate) {
        double[] all = new double[n];
        java.util.Arrays.fill(all, rate);
        ratesFor(topic, all);
    }

    static String answer(String assignment) {
        return "{\"algorithm\":\"mwf\",\"capacity\":100,\"assignment\":" + assignment + ",\"consumers\":[],"
                + "\"moves\":[{\"topic\":\"t\",\"partition\":1,\"from\":\"a\",\"to\":\"b\",\"rate\":5}],"
                + "\"delta\":{\"rows\":[],\"columns\":[],\"cells\":[]},\"rscore\":0.25,\"consumer_count\":2,"
                + "\"lower_bound\":1,\"overloaded_partitions\":[],\"overloaded_members\":[\"a\"],"
                + "\"recommended_consumers\":3,\"outputs\":{},\"group\":\"g\",\"version\":4,\"added_later\":1}";
    }

    @Override
    public void close() {
        gate.countDown();
        server.stop(0);
    }
}
